"""Property: any phone written in any accepted form resolves to the same contact (through resolution itself)."""

from __future__ import annotations

import phonenumbers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchboard.api.auth import AuthContext
from switchboard.contacts import models, service
from switchboard.store import get_store
from tests.unit.test_contact_identifiers import REGIONS, written_forms


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(region=st.sampled_from(REGIONS), data=st.data())
def test_any_written_form_resolves_to_the_contact(aws_resources, region: str, data):
    store = get_store()
    auth = AuthContext("api_key", "key_p", None, "org_prop", "owner", "key_p")
    number = phonenumbers.example_number(region)
    forms = written_forms(number)
    created, _ = service.upsert(store, auth, models.ContactCreate(phone=data.draw(st.sampled_from(forms))))
    for form in forms:
        kind = "whatsapp" if form.endswith("@s.whatsapp.net") else data.draw(st.sampled_from(["phone", "wa_id"]))
        found = service.resolve(store, auth, [models.Identifier(type=kind, value=form)])
        assert found["id"] == created.id, (region, form)
        assert service.by_phone(store, auth, form.removesuffix("@s.whatsapp.net")).id == created.id
