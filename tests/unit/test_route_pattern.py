"""Route expressions are compiled on first match: the expression, its groups and what it matches are exactly those
Powertools' own `APIGatewayRestResolver._compile_regex` gives, for every route of every function."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from switchboard.api.app import Resolver, RoutePattern

ROOT = Path(__file__).resolve().parents[2]
RULES = [
    "/v1/health",
    "/openapi.json",
    "/v1/contacts/<contactID>",
    "/v1/channels/<channelID>/media/<mediaID>",
    "/v1/conversations/<convID>/labels/<labelID>",
    ".*",
]
PATHS = [
    "/v1/health",
    "/v1/health/",
    "/openapi.json",
    "/v1/contacts/ct_1",
    "/v1/contacts/a%20b/",
    "/v1/contacts/",
    "/v1/channels/ch_1/media/m.1",
    "/v1/conversations/c_1/labels/lb_1",
    "/v1/conversations/c_1/labels",
    "/x",
]


@pytest.mark.parametrize("rule", RULES)
def test_same_expression_groups_and_matches_as_powertools(rule):
    ours, theirs = Resolver._compile_regex(rule), APIGatewayRestResolver._compile_regex(rule)
    assert isinstance(ours, RoutePattern)
    assert ours.pattern == theirs.pattern and ours.groups == theirs.groups
    for path in PATHS:
        mine, other = ours.match(path), theirs.match(path)
        assert (mine and mine.groupdict()) == (other and other.groupdict()), path


def test_every_registered_route_of_every_function():
    checked = 0
    for app_file in sorted((ROOT / "functions").glob("*/app.py")):
        if "create_resolver()" not in app_file.read_text():
            continue
        resolver = importlib.import_module(f"functions.{app_file.parent.name}.app").app
        for route in resolver._static_routes + resolver._dynamic_routes:
            theirs = APIGatewayRestResolver._compile_regex(route.path)
            assert (route.rule.pattern, route.rule.groups) == (theirs.pattern, theirs.groups), route.path
            checked += 1
    assert checked > 100
