"""Routes of the waba group (being built)."""

from __future__ import annotations

from switchboard.api.app import create_resolver, make_handler

app = create_resolver()

handler = make_handler(app)
