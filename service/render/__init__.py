"""What the service says on GitHub, rendered from plain data with no I/O: the result comment
and commit status of a job (`comment`), the replies to commands (`replies`), the data they
take (`views`) and the escaping of untrusted text (`markdown`)."""
