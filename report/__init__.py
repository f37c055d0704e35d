"""The report of a job, rendered from plain data with no I/O, for the service (what it posts on
GitHub) and the runner (`ondemand run`) alike: the result comment (`comment`, with its
`accuracy` and `performance` sections and the `table` built from its column specifications),
the one-line verdict and headline (`summary`), the commit status and check run (`checks`), the
head's one `ondemand` check (`head_check`), the gates' decision (`gate`), what each row's
change says (`verdicts`), the failures' classes (`failures`), the change selection's reply
(`selection`), the data they take (`views`) and the escaping of untrusted text (`markdown`).
It imports `workflows`, `ondemand` and libraries only, never `service` or `runner`."""
