"""Fault tests share the integration fixtures: moto in-process with template.yaml's resources, the API in-process."""

from __future__ import annotations

from tests.integration.conftest import api, aws_resources

__all__ = ["api", "aws_resources"]
