"""The job queue: jobs, runners and logs as separate repositories, the claim wake-up, and the
reaper of lapsed leases."""
