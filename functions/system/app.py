"""System routes: health, readiness, version and the merged OpenAPI document. All public."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import Field

from switchboard import __version__
from switchboard.api.app import PUBLIC, create_resolver, make_handler
from switchboard.api.auth import public
from switchboard.api.envelope import Data
from switchboard.config import get_settings
from switchboard.errors import ServiceUnavailable
from switchboard.models import BaseModel
from switchboard.openapi_doc import load_openapi
from switchboard.store import get_store, keys

app = create_resolver()


class Health(BaseModel):
    """The function is alive."""

    status: str = Field(description="Always `ok`")

    openapi_examples = ({"status": "ok"},)


class Ready(BaseModel):
    """The service can reach what it needs."""

    status: str = Field(description="`ready`")
    checks: dict[str, str] = Field(description="Each dependency checked and its state")

    openapi_examples = ({"status": "ready", "checks": {"table": "ok"}},)


class Version(BaseModel):
    """The deployed build."""

    version: str = Field(description="The API's version")
    commit: str = Field(description="The deployed commit")
    stage: str

    openapi_examples = ({"version": "1.8.0", "commit": "7313af4", "stage": "prod"},)


@app.get(
    "/v1/health",
    security=PUBLIC,
    middlewares=public(),
    tags=["system"],
    summary="Liveness",
    description=("Answers `ok` while the function runs; checks nothing else.\n\nWho may call: anyone; no credential."),
)
def health() -> Data[Health]:
    return Data(data=Health(status="ok"))


@app.get(
    "/v1/ready",
    security=PUBLIC,
    middlewares=public(),
    tags=["system"],
    summary="Readiness",
    description=(
        "Checks that the table is reachable; 503 `service_unavailable` otherwise.\n\n"
        "Who may call: anyone; no credential."
    ),
)
def ready() -> Data[Ready]:
    try:
        get_store().get(keys.READY_PROBE)
    except Exception as err:
        raise ServiceUnavailable("The table is not reachable.") from err
    return Data(data=Ready(status="ready", checks={"table": "ok"}))


@app.get(
    "/v1/version",
    security=PUBLIC,
    middlewares=public(),
    tags=["system"],
    summary="Version",
    description=("The deployed version, commit and stage.\n\nWho may call: anyone; no credential."),
)
def version() -> Data[Version]:
    settings = get_settings()
    return Data(data=Version(version=__version__, commit=settings.git_commit, stage=settings.stage))


@app.get(
    "/openapi.json",
    security=PUBLIC,
    middlewares=public(),
    tags=["system"],
    summary="OpenAPI document",
    description=(
        "This document: every route, its parameters, bodies, responses and security.\n\n"
        "Who may call: anyone; no credential."
    ),
)
def openapi() -> Response[Any]:
    return Response(status_code=200, content_type="application/json", body=load_openapi())


handler = make_handler(app)
