"""Base classes of every request and resource model (a module of its own: importing it costs almost nothing)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field
from pydantic import BaseModel as _PydanticModel


class BaseModel(_PydanticModel):
    """Schemas are built on first use, not at import: a cold start pays only for the models its route needs."""

    model_config = ConfigDict(defer_build=True)


class Strict(BaseModel):
    """Request bodies: unknown fields are refused, strings trimmed."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, defer_build=True)


def _valid_email(value: str) -> str:
    from email_validator import EmailNotValidError, validate_email  # imported on first use (~25 ms)

    try:
        return str(validate_email(value, check_deliverability=False).normalized)
    except EmailNotValidError as err:
        raise ValueError(f"not a valid e-mail address: {err}") from None


EmailStr = Annotated[str, Field(max_length=320), AfterValidator(_valid_email)]
