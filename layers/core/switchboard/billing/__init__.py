"""Billing: the organization's billing profile and plan, metered usage (messages sent per channel, contacts
stored) and invoices built from it, with their states (draft, open, paid, void, uncollectible)."""
