"""HTTP plumbing shared by every endpoint group."""
