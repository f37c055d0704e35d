"""What a job produced, as the service's typed results: the steps' artifacts read as hostile
input (JUnit XML, benchmark JSON, proof logs), the comparison's statistics, and the job's
progress as it runs."""
