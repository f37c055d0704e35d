"""Posting to GitHub: what to say when a job changes or a command is answered (`notices`, built
from `job_views`), the outbox that delivers it in order with retries (`outbox`), and what it
leaves out while an installation's hourly budget of calls runs low (`low_budget`, pure). What
is said is rendered by the `report` package."""
