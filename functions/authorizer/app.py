"""REQUEST Lambda authorizer: X-Api-Key or Authorization: Bearer → organization, principal and role.

The API Gateway cache is off (both headers must work on every route, and one method cannot OR two identity
sources), so each request costs one consistent GetItem on the credential hash (plus one for a session's
membership). Revocation therefore takes effect on the very next request.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import tracing
from switchboard.errors import Unauthenticated
from switchboard.identity.authn import authenticate
from switchboard.logs import redact_logs
from switchboard.store import get_store

logger = Logger()
redact_logs(logger)


def _policy(method_arn: str, principal: str, context: dict[str, str]) -> dict[str, Any]:
    # arn:aws:execute-api:region:account:api-id/stage/METHOD/path → allow every method and path of this stage.
    arn_parts = method_arn.split("/")
    resource = "/".join(arn_parts[:2]) + "/*/*" if len(arn_parts) >= 2 else method_arn
    return {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": resource}],
        },
        "context": context,
    }


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        source_ip = ((event.get("requestContext") or {}).get("identity") or {}).get("sourceIp")
        auth = authenticate(get_store(), event.get("headers"), source_ip)
    except Unauthenticated as err:
        logger.info("credential refused", extra={"reason": err.message})
        raise Exception("Unauthorized") from None  # API Gateway's contract for a 401 (gateway response UNAUTHORIZED)
    logger.append_keys(organization_id=auth.organization_id, principal_id=auth.principal_id)
    return _policy(event.get("methodArn", ""), auth.principal_id, auth.to_authorizer_context())
