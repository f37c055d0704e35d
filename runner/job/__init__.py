"""One job from checkout to result: its workspace at the pinned SHA, the jail and scrubbed
environment its steps run in, each step's process, its log and the secrets cut out of it,
the repository's layout; each step kind in `kinds/` (the benchmark's before → after rounds
among them; `execute` ties them together)."""
