"""Storage: the engine and sessions, the tables, their migrations, and the leased-row helper."""
