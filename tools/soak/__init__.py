"""The soak: production's way of failing, on one machine. Many faults at once, on several
replicas behind a balancer, under a maintainer's load, then invariants checked from outside.

    python -m tools.soak --minutes 3 --replicas 3 --runners 8 --seed 1 [--json out.json]

One job per module: `cli` (options, the run's phases, the table), `repo` (the soak
repositories), `world` (every process: sandbox, PostgreSQL, replicas, HAProxy, runners),
`load` (the commands and pushes a maintainer types), `faults` (kills, stops, GitHub's 5xx and
limits, database and balancer restarts), `collect` (what GitHub, the database and the runners'
logs recorded), `events` (the recorded record) and `invariants` (pure checks over it).
"""
