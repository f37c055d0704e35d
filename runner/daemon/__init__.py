"""The long-running runner: its pool (`pool`: signals, registration, slots), each slot's
worker (`worker`: claim and acknowledge), the job runner (`job_runner`: run, deliver, retry,
prune, warm build), a job's heartbeat and cancel, the backends' device checks, the runner's
fitness, and the trusted build that warms the next job after a verdict."""
