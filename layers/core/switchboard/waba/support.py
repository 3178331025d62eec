"""Support labels: the Graph API errors an onboarding meets, grouped by what the business has to do about them.

`GET /v1/waba/labels/support` serves this catalogue; every recorded onboarding error (`/v1/waba/errors`) carries the
key of the label its Graph code belongs to, so a support desk or the signup page can show the human text and the next
action. The codes and titles are Meta's (Graph API and WhatsApp Cloud API error references); `steps` says where in the
flow each kind shows up. A code that is in no label is `unknown` (the provider's message is still recorded as is).
"""

from __future__ import annotations

from typing import Any

from switchboard.waba import models

_LABELS: list[dict[str, Any]] = [
    {
        "key": "authorization_code",
        "name": "Authorization code not accepted",
        "description": "The code from the embedded signup could not be exchanged: it is malformed, was already "
        "used (a code works once), has expired (about ten minutes), or the redirect_uri differs from the dialog's.",
        "action": "Run the embedded signup again and exchange the new code at once; with the redirect flow, start "
        "with the same redirect_uri the dialog used.",
        "retryable": False,
        "steps": ["exchange_code"],
        "graph_codes": [
            {"code": 100, "subcode": 36007, "title": "Invalid verification code format"},
            {"code": 100, "subcode": 36008, "title": "The redirect_uri does not match the one of the OAuth dialog"},
            {"code": 100, "subcode": 36009, "title": "This authorization code has been used"},
        ],
    },
    {
        "key": "app_credentials",
        "name": "App credentials refused",
        "description": "Graph did not accept the Meta app's id or secret used for the exchange.",
        "action": "Check META_APP_ID / META_APP_SECRET (or the app_id and app_secret given to oauth/start).",
        "retryable": False,
        "steps": ["exchange_code"],
        "graph_codes": [
            {"code": 101, "title": "Error validating application: invalid application ID"},
            {"code": 1, "title": "Error validating client secret (Graph reports it with the generic code 1)"},
        ],
    },
    {
        "key": "access_token",
        "name": "Access token invalid or expired",
        "description": "The business's token is no longer valid: it expired, the user changed their password, "
        "removed the app, or the token was revoked.",
        "action": "Run the embedded signup again to get a new token.",
        "retryable": False,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 190, "title": "Invalid OAuth access token"},
            {"code": 190, "subcode": 458, "title": "The user has not authorized the app"},
            {"code": 190, "subcode": 460, "title": "The session was invalidated (password changed)"},
            {"code": 190, "subcode": 463, "title": "The access token has expired"},
            {"code": 190, "subcode": 467, "title": "The access token is invalid"},
            {"code": 102, "title": "API session: the session key is invalid or no longer valid"},
            {"code": 104, "title": "An access token is required"},
        ],
    },
    {
        "key": "permissions",
        "name": "Missing permission on the business account",
        "description": "The token does not carry whatsapp_business_management / whatsapp_business_messaging for "
        "this WhatsApp Business Account or phone number, or the object is not visible to the app.",
        "action": "In the embedded signup, select the WhatsApp Business Account and number and grant every "
        "permission asked for; the business admin may have to accept the app in Business Settings.",
        "retryable": False,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 10, "title": "Permission denied: permission not granted or removed"},
            {"code": 200, "title": "Permissions error"},
            {"code": 3, "title": "Capability: the app lacks the capability for this call"},
            {"code": 100, "subcode": 33, "title": "The object does not exist or cannot be loaded (permissions)"},
            {"code": 131005, "title": "Access denied"},
        ],
    },
    {
        "key": "two_step_pin",
        "name": "Two-step verification PIN",
        "description": "The number already has a two-step verification PIN and the one given does not match, or "
        "too many wrong PINs were tried.",
        "action": "Register with the number's current PIN, or reset two-step verification in WhatsApp Manager "
        "(after too many guesses, wait before the next try).",
        "retryable": True,
        "steps": ["register_phone"],
        "graph_codes": [
            {"code": 133005, "title": "Two step verification PIN mismatch"},
            {"code": 133008, "title": "Too many two step verification PIN guesses"},
            {"code": 133009, "title": "Two step verification PIN guessed too fast"},
        ],
    },
    {
        "key": "phone_registration",
        "name": "Phone number cannot be registered yet",
        "description": "The number is not ready for the Cloud API: it is still registered elsewhere, was deleted "
        "recently, needs re-verification, or its display name is not approved.",
        "action": "Finish the deregistration (or wait the few minutes Meta asks for), verify the number again in "
        "WhatsApp Manager, and have the display name approved; then register again.",
        "retryable": True,
        "steps": ["register_phone", "sync_meta"],
        "graph_codes": [
            {"code": 133000, "title": "Incomplete deregistration"},
            {"code": 133006, "title": "Phone number re-verification needed"},
            {"code": 133010, "title": "Phone number not registered"},
            {"code": 133015, "title": "Wait a few minutes before registering this recently deleted number"},
            {"code": 131037, "title": "The number needs display name approval"},
            {"code": 131045, "title": "Incorrect certificate: phone number registration error"},
        ],
    },
    {
        "key": "rate_limited",
        "name": "Rate limited by Meta",
        "description": "Meta throttled the app or the business account (register/deregister attempts included).",
        "action": "Retry the step later; Switchboard answers 503 for the throttling codes, with Retry-After.",
        "retryable": True,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 4, "title": "Application request limit reached"},
            {"code": 17, "title": "User request limit reached"},
            {"code": 32, "title": "Page request limit reached"},
            {"code": 613, "title": "Calls to this API have exceeded the rate limit"},
            {"code": 80007, "title": "WhatsApp Business Account rate limit reached"},
            {"code": 130429, "title": "Cloud API throughput reached"},
            {"code": 133016, "title": "Account register/deregister rate limit exceeded"},
        ],
    },
    {
        "key": "account_restricted",
        "name": "Business account restricted",
        "description": "Meta restricted or locked the business account or number for policy or integrity reasons.",
        "action": "Check Business Support Home / WhatsApp Manager for the restriction and request a review.",
        "retryable": False,
        "steps": ["register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 368, "title": "Temporarily blocked for policy violations"},
            {"code": 131031, "title": "The business account has been locked"},
            {"code": 130497, "title": "The business account is restricted from messaging users in this country"},
        ],
    },
    {
        "key": "meta_unavailable",
        "name": "Meta temporarily unavailable",
        "description": "Graph reported a temporary failure or could not be reached.",
        "action": "Retry the same step; nothing has to change.",
        "retryable": True,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 2, "title": "Temporary service issue"},
            {"code": 131000, "title": "Something went wrong"},
            {"code": 131016, "title": "Service unavailable"},
            {"code": 133004, "title": "Server temporarily unavailable"},
            {"code": 131057, "title": "The business account is in maintenance mode"},
        ],
    },
    {
        "key": "invalid_parameter",
        "name": "Request refused as invalid",
        "description": "Graph refused a parameter of the step (for example a PIN that is not six digits or an id "
        "that is not a number of this account).",
        "action": "Check the values sent to the step; the recorded message names the parameter.",
        "retryable": True,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [
            {"code": 100, "title": "Invalid parameter"},
            {"code": 131008, "title": "Required parameter is missing"},
            {"code": 131009, "title": "Parameter value is not valid"},
        ],
    },
    {
        "key": "signup_flow",
        "name": "Error inside the embedded signup",
        "description": "The embedded signup window reported an error (an ERROR event) before the business finished; "
        "its error_id and session_id identify the case for Meta support.",
        "action": "Start a new onboarding; if it repeats, give Meta support the recorded error_id and session_id.",
        "retryable": False,
        "steps": ["signup_event"],
        "graph_codes": [],
    },
    {
        "key": "unknown",
        "name": "Other error",
        "description": "An error this catalogue does not know yet; the provider's message is recorded verbatim.",
        "action": "Read the recorded message and fbtrace_id; Meta support can trace a request by its fbtrace_id.",
        "retryable": False,
        "steps": ["exchange_code", "register_phone", "subscribe_webhook", "sync_meta"],
        "graph_codes": [],
    },
]


def labels() -> list[models.SupportLabel]:
    return [models.SupportLabel.model_validate(label) for label in _LABELS]


def label_for(code: int | None, subcode: int | None = None) -> str:
    """The label of a Graph error: an exact (code, subcode) entry first, then the code alone, else `unknown`."""
    if code is None:
        return "unknown"
    fallback = None
    for label in _LABELS:
        for entry in label["graph_codes"]:
            if entry["code"] != code:
                continue
            if entry.get("subcode") is not None and entry["subcode"] == subcode:
                return str(label["key"])
            if entry.get("subcode") is None and fallback is None:
                fallback = str(label["key"])
    return fallback or "unknown"
