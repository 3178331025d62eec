"""Background jobs: work that grows with a tenant's data, done in chunks on JobsQueue (see `service`)."""
