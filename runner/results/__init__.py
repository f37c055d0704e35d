"""What a job produced, as the service's typed results: the steps' artifacts read as hostile
input (JUnit XML, benchmark JSON, proof logs), what a failing test's re-runs say of it, and
the job's progress as it runs."""
