"""Identity and access: users, organizations, memberships, credentials."""
