"""Identity resources as the API shows them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RoleName = Literal["owner", "admin", "member", "viewer"]


class Organization(BaseModel):
    id: str
    name: str
    created_at: str
    updated_at: str


class OrganizationCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class OrganizationUpdate(BaseModel):
    name: str = Field(min_length=1, max_length=200)


class Member(BaseModel):
    """The spec's Organization member."""

    id: str
    user_id: str
    role: str
    user_email: str
    user_name: str
    user_image: str
    created_at: str


class ApiKey(BaseModel):
    id: str
    name: str
    role: str
    prefix: str
    created_at: str
    created_by: str | None = None


class ApiKeyCreated(ApiKey):
    key: str = Field(description="The plain key. Shown only in this response.")


class ApiKeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    role: RoleName = "member"
