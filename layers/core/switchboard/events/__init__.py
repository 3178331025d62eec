"""Domain events: written to the outbox in the same transaction as the change, published from the stream."""

from switchboard.events.outbox import EVENT_SOURCE, OutboxEvent, outbox_put

__all__ = ["EVENT_SOURCE", "OutboxEvent", "outbox_put"]
