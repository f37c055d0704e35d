"""Receiving: a signed delivery is recorded (`webhook`, `triage`), then the inbox worker
(`inbox`) hands it to `handle`, which parses commands (`commands`), decides who may run them
(`gate` over the pure `trust`), pins the commit and queues the jobs."""
