"""Request bodies on every group: a JSON array where an object is declared, and booleans where numbers are declared,
are refused in the envelope (fuzzer findings: Powertools validated an array's first element in the body's place, and
pydantic's lax mode read `false` as 0)."""

from __future__ import annotations

import pytest

from tests.integration.support import Api

WEBHOOKS = "/v1/settings/developer/webhooks"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"{WEBHOOKS}/portal-access", [None, None]),  # was a 201: the optional body read as absent
        (f"{WEBHOOKS}/portal-access", [{"expires_in": 600}]),
        ("/v1/contacts", [{"name": "Ada"}]),  # was a 201 for the first element
        ("/v1/contact-tags", []),
        ("/v1/organizations", [{"name": "x"}]),
    ],
)
def test_an_array_is_not_an_object_body(api: Api, path: str, body: list):
    # Creating an organization is a signed-in user's act: an API key is refused before the body is read.
    headers = api.login("owner@example.com") if path == "/v1/organizations" else None
    error = api.assert_error(api.post(path, json=body, headers=headers), 400, "validation_failed")
    assert error["details"] == [{"field": "body", "message": "Input should be a JSON object, not an array"}]


def test_objects_pass_and_arrays_inside_them_are_validated_as_declared(api: Api):
    created = api.post("/v1/contacts", json={"name": "Ada"})
    assert created.status_code == 201, created.text
    error = api.assert_error(api.post("/v1/cdp/events", json={"events": []}), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.events", error


def test_only_sequence_annotations_take_an_array():
    from typing import Annotated

    from switchboard.api.app import _sequence_annotation
    from switchboard.contacts.models import ContactCreate

    assert _sequence_annotation(list[int]) and _sequence_annotation(Annotated[list[ContactCreate] | None, "x"])
    assert not _sequence_annotation(ContactCreate) and not _sequence_annotation(str)
    assert not _sequence_annotation(ContactCreate | None)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/cdp/lifecycle-stages", {"key": "lead", "name": "Lead", "position": False}, "body.position"),
        (f"{WEBHOOKS}/portal-access", {"expires_in": True}, "body.expires_in"),
        (
            "/v1/cdp/templates",
            {"name": "t", "lifecycle_stages": [{"key": "lead", "name": "Lead", "position": False}]},
            "body.lifecycle_stages.0.position",
        ),
    ],
)
def test_a_boolean_is_not_a_number(api: Api, path: str, body: dict, field: str):
    error = api.assert_error(api.post(path, json=body), 400, "validation_failed")
    numbers = ("Input should be a valid integer", "Input should be a valid number")  # pydantic's strict mode
    assert any(d["field"] == field and d["message"] in numbers for d in error["details"]), error


@pytest.mark.parametrize("value", [0, 1, "true", "yes", "off"])
def test_a_number_or_a_string_is_not_a_boolean(api: Api, value: object):
    """`required` of a custom field is a boolean (found by fuzzing: pydantic's lax mode took 0, 1 and "yes")."""
    body = {"name": "t", "custom_fields": [{"key": "tier", "label": "Tier", "type": "text", "required": value}]}
    error = api.assert_error(api.post("/v1/cdp/templates", json=body), 400, "validation_failed")
    detail = {"field": "body.custom_fields.0.required", "message": "Input should be a valid boolean"}
    assert detail in error["details"], error


def test_numbers_and_booleans_where_declared_still_pass(api: Api):
    stage = api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead", "position": 3})
    assert stage.status_code == 201, stage.text
    assert stage.json()["data"]["position"] == 3
    field = {"key": "tier", "label": "Tier", "type": "text", "required": True}
    template = api.post("/v1/cdp/templates", json={"name": "t", "custom_fields": [field]})
    assert template.status_code == 201, template.text
    assert template.json()["data"]["custom_fields"][0]["required"] is True


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/v1/cdp/events",
            {
                "events": [
                    {"name": "signed_up", "contact": {"type": "email", "value": "a@example.com"}, "properties": {"": 1}}
                ]
            },
            "body.events.0.properties",
        ),
        (
            "/v1/auth/fingerprint-events",
            {"telemetry_id": "t1", "event_type": "open", "properties": {"x": 1e200}},
            "body.properties",
        ),
        ("/v1/settings/integrations", {"type": "slack", "name": "s", "config": {"": "x"}}, "body.config"),
    ],
)
def test_free_form_documents_must_be_storable(api: Api, path: str, body: dict, field: str):
    """An empty key or a number DynamoDB cannot hold was a 500 or an unreadable item later; now a 400 naming it."""
    error = api.assert_error(api.post(path, json=body), 400, "validation_failed")
    assert any(d["field"].startswith(field) for d in error["details"]), error
