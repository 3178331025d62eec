"""Messaging: channels, messages, conversations, inbound traffic and delivery statuses."""
