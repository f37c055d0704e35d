"""The long-running runner: its claim loop (`loop`), a job's heartbeat and cancel, the
backends' device checks, and the trusted build that warms the next job after a verdict."""
