"""The GitHub sandbox: a GitHub-compatible REST subset, an admin API and signed webhook
delivery, for the demo and the tests (see README.md here)."""
