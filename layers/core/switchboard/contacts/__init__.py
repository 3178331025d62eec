"""Contacts: the canonical CRM record, its identities across channels, notes, tags, consent and suppressions."""
