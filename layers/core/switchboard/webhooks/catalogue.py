"""The events an endpoint may subscribe to: every event of the spec's Events section, plus `webhook.test`.

Only these types are ever delivered. Internal domain events (`message.queued`, …) travel the same bus but are not
part of the catalogue, so an endpoint with an empty filter ("every event") never receives them.
"""

from __future__ import annotations

TEST_EVENT = "webhook.test"

EVENT_TYPES: dict[str, tuple[str, str]] = {
    # name: (group, fires when)
    "message.new": ("messaging", "A new message in a conversation (inbound, or certain outbound echoes)."),
    "message.sent": ("messaging", "An outbound message was sent from the workspace."),
    "message.status_update": ("messaging", "The delivery, read or failed status of a sent message changed."),
    "conversation.updated": ("messaging", "Conversation metadata changed (assignment, status, preview, tags)."),
    "contact.updated": ("messaging", "A contact profile was updated (also emitted on creates)."),
    "template.status_update": ("messaging", "A template's approval status changed."),
    "commerce.order.updated": ("commerce", "An order's or its payment's state changed."),
    "crm.record.created": ("crm", "A CRM record was created."),
    "crm.record.updated": ("crm", "A CRM record was updated."),
    "crm.record.deleted": ("crm", "A CRM record was deleted."),
    "crm.deal.stage_changed": ("crm", "A deal moved to another stage."),
    "crm.task.completed": ("crm", "A task was completed."),
    "crm.comment.created": ("crm", "A comment was added."),
    "crm.comment.deleted": ("crm", "A comment was deleted."),
    "crm.list.entry_added": ("crm", "A record was added to a list."),
    "crm.list.entry_removed": ("crm", "A record was removed from a list."),
    "crm.relationship.linked": ("crm", "Two records were linked."),
    "crm.relationship.unlinked": ("crm", "Two records were unlinked."),
    "crm.import.committed": ("crm", "An import was committed."),
    TEST_EVENT: ("webhooks", "A test delivery requested with POST …/endpoints/{endpointID}/test."),
}


def is_published(event_type: str) -> bool:
    return event_type in EVENT_TYPES


def subscribed(filter_types: list[str] | None, event_type: str) -> bool:
    """An empty or absent filter subscribes to every published event (test events go only to their endpoint)."""
    if not is_published(event_type):
        return False
    return not filter_types or event_type in filter_types
