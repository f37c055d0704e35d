"""The service's own replies, rendered from plain data with no I/O: to commands (help from the
command registry's rows, a command error, a duplicate, cancel, retest and accept summaries,
refusals; `replies`) and to a malformed settings file (`config_replies`). The report of a job
itself is the `report` package's, which the runner shares."""
