"""The catalog database: runs, tags, shares and leases on SQLite or PostgreSQL."""
