"""Reporting to GitHub: what to say when a job changes or a command is answered (`notices`,
built from `job_views`), the outbox that delivers it in order with retries (`outbox`), and the
one GitHub client (`github`)."""
