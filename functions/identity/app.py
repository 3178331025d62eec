"""Identity and access routes: organizations, members, API keys."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import authenticated, requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, Meta
from switchboard.api.pagination import list_meta
from switchboard.identity import models, service
from switchboard.store import get_store

app = create_resolver()
TAGS = ["organizations"]


@app.get("/v1/organization", middlewares=requires("viewer"), tags=TAGS, summary="The current organization")
def get_organization() -> Data[models.Organization]:
    return Data(data=service.get_organization(get_store(), current_auth(app)))


@app.patch("/v1/organization", middlewares=requires("owner"), tags=TAGS, summary="Rename the organization")
def update_organization(body: Annotated[models.OrganizationUpdate, Body()]) -> Data[models.Organization]:
    return Data(data=service.update_organization(get_store(), current_auth(app), body))


@app.get("/v1/organizations", middlewares=authenticated(), tags=TAGS, summary="The caller's organizations")
def list_organizations() -> dict[str, Any]:
    orgs = service.list_my_organizations(get_store(), current_auth(app))
    return {"data": orgs, "meta": list_meta(len(orgs), has_more=False, total=len(orgs))}


@app.post(
    "/v1/organizations", middlewares=authenticated(), tags=TAGS, status_code=201, summary="Create an organization"
)
def create_organization(body: Annotated[models.OrganizationCreate, Body()]) -> Data[models.Organization]:
    return Data(data=service.create_organization(get_store(), current_auth(app), body))


@app.get("/v1/members", middlewares=requires("viewer"), tags=["members"], summary="List organization members")
def list_members(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ListData[models.Member]:
    members, has_more, total = service.list_members(get_store(), current_auth(app), limit, offset)
    return ListData(data=members, meta=Meta(has_more=has_more, limit=limit, offset=offset, total=total))


@app.get("/v1/api-keys", middlewares=requires("admin"), tags=["api-keys"], summary="List API keys")
def list_api_keys() -> ListData[models.ApiKey]:
    items = service.list_api_keys(get_store(), current_auth(app))
    return ListData(data=items, meta=Meta(has_more=False, limit=len(items), total=len(items)))


@app.post(
    "/v1/api-keys", middlewares=requires("admin"), tags=["api-keys"], status_code=201, summary="Create an API key"
)
def create_api_key(body: Annotated[models.ApiKeyCreate, Body()]) -> Data[models.ApiKeyCreated]:
    return Data(data=service.create_api_key(get_store(), current_auth(app), body))


@app.delete(
    "/v1/api-keys/<key_id>", middlewares=requires("admin"), tags=["api-keys"], status_code=204, summary="Revoke"
)
def revoke_api_key(key_id: str) -> None:
    service.revoke_api_key(get_store(), current_auth(app), key_id)


handler = make_handler(app)
