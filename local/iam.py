"""Each function's IAM grants as AWS evaluates them: `template.yaml` transformed the way CloudFormation does.

`PolicyModel.build(template, resources)` runs aws-sam-translator on the template (the `AWS::Serverless-2016-10-31`
transform CloudFormation applies: SAM policy templates such as `DynamoDBCrudPolicy` expanded, the execution role of
every function generated with its managed policies), then resolves each role's policies with concrete ARNs: the
physical names of `resources` (`local.resources`; without it, the names the local stack would plan), account
123456789012, us-east-1. `model.allowed(function, action, resource)` then answers as IAM does for an identity policy:
an explicit Deny wins, else any Allow whose actions and resources match (`*` and `?` wildcards; actions
case-insensitive), else denied.

Conditions: `StringEquals` / `StringLike` (and their `StringNotEquals` / `StringNotLike` forms) on the condition keys
the recorder gives a call (`ses:FromAddress` of a mail) are evaluated; a statement with any other operator or key
counts as not matching (an Allow with it grants nothing here, a Deny with it is ignored). Not modelled: permission
boundaries, resource policies and session policies. A managed
policy must be in `MANAGED_POLICIES` (AWS's document, the statements that matter) or a resource of the template.

The recorder that checks every call a function makes against this model is `local.iam_recorder`.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from local.template import ACCOUNT_ID, REGION, LocalTemplate, TemplateError

ARN_PREFIX = f"{REGION}:{ACCOUNT_ID}"

_LOGS = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
# AWS managed policies SAM attaches to function roles (Tracing, SQS and stream event sources), as AWS publishes them.
MANAGED_POLICIES: dict[str, list[dict[str, Any]]] = {
    "AWSLambdaBasicExecutionRole": [{"Effect": "Allow", "Action": _LOGS, "Resource": "*"}],
    "AWSXrayWriteOnlyAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": "*",
        }
    ],
    "AWSLambdaSQSQueueExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", *_LOGS],
            "Resource": "*",
        }
    ],
    "AWSLambdaDynamoDBExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:DescribeStream",
                "dynamodb:GetRecords",
                "dynamodb:GetShardIterator",
                "dynamodb:ListStreams",
                *_LOGS,
            ],
            "Resource": "*",
        }
    ],
}

log = logging.getLogger("local.iam")


class PolicyModelError(TemplateError):
    """The template's grants cannot be modelled (a transform error, an unknown managed policy)."""


# The transform ------------------------------------------------------------------------------------------------------
def sam_transform(raw: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` (a template as `local.template.parse_yaml` reads it) through aws-sam-translator, as CloudFormation
    transforms it after `sam package`: local code paths stand for the S3 locations the package step uploads."""
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    template = copy.deepcopy(dict(raw))
    sections = [
        *(template.get("Resources") or {}).values(),
        {"Properties": (template.get("Globals") or {}).get("Function") or {}},
    ]
    for resource in sections:
        props = resource.get("Properties") or {}
        for name in ("CodeUri", "ContentUri"):
            if isinstance(props.get(name), str):
                props[name] = "s3://switchboard-artifacts/" + props[name].strip("/")
    values = dict(parameters)
    translator = Translator(None, Parser(), boto_session=SimpleNamespace(region_name=REGION))
    try:
        return translator.translate(template, parameter_values=values, get_managed_policy_map=lambda: {})  # type: ignore[no-any-return]
    except InvalidDocumentException as err:
        causes = "; ".join(str(cause) for cause in err.causes)
        raise PolicyModelError(f"aws-sam-translator refused the template: {causes}") from None


_transformed: dict[tuple[Any, ...], dict[str, Any]] = {}
_transform_lock = threading.Lock()


def transformed(template: LocalTemplate) -> dict[str, Any]:
    """`sam_transform` of the template's file, once per process and file version."""
    stat = template.path.stat()
    key = (str(template.path), stat.st_mtime_ns, stat.st_size, repr(sorted(template.parameters.items())))
    with _transform_lock:
        if key not in _transformed:
            _transformed[key] = sam_transform(template.raw, template.parameters)
        return _transformed[key]


# Statements ---------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _pattern(text: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)
    return re.compile(body, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


_CONDITION_OPERATORS = frozenset({"StringEquals", "StringLike", "StringNotEquals", "StringNotLike"})


@dataclass(frozen=True)
class Statement:
    policy: str  # where it comes from: an inline policy's name or a managed policy
    effect: str  # Allow | Deny
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    condition: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (operator, key, values), all must hold
    conditional: bool = False  # a Condition this model cannot evaluate

    @classmethod
    def parse(cls, policy: str, raw: Mapping[str, Any]) -> Statement:
        effect = str(raw.get("Effect", ""))
        if effect not in ("Allow", "Deny"):
            raise PolicyModelError(f"{policy}: statement with Effect {effect!r}")
        return cls(
            policy=policy,
            effect=effect,
            actions=_strings(raw.get("Action")),
            not_actions=_strings(raw.get("NotAction")),
            resources=_strings(raw.get("Resource")),
            not_resources=_strings(raw.get("NotResource")),
            condition=tuple(
                (str(operator), str(key), _strings(values))
                for operator, tests in (raw.get("Condition") or {}).items()
                for key, values in (tests or {}).items()
            ),
            conditional=any(op not in _CONDITION_OPERATORS for op in (raw.get("Condition") or {})),
        )

    def holds(self, context: Mapping[str, str]) -> bool:
        """Whether every condition of the statement holds for a call with these condition keys (a key the call
        does not have fails a positive test, as in IAM)."""
        for operator, key, values in self.condition:
            value = context.get(key)
            like = operator.startswith("StringLike") or operator.startswith("StringNotLike")
            found = value is not None and any(
                (_pattern(v, False).fullmatch(value) if like else v == value) for v in values
            )
            if operator.startswith("StringNot"):
                if value is not None and found:
                    return False
            elif not found:
                return False
        return True

    def matches(self, action: str, resource: str) -> bool:
        if self.actions:
            if not any(_pattern(a, True).fullmatch(action) for a in self.actions):
                return False
        elif any(_pattern(a, True).fullmatch(action) for a in self.not_actions):
            return False
        if self.resources:
            return any(_pattern(r, False).fullmatch(resource) for r in self.resources)
        return not any(_pattern(r, False).fullmatch(resource) for r in self.not_resources)


@dataclass
class FunctionPolicy:
    """The identity policies of one function's execution role."""

    function: str
    role: str
    statements: list[Statement]
    _decisions: dict[tuple[Any, ...], bool] = field(default_factory=dict, repr=False)

    def allowed(self, action: str, resource: str, context: Mapping[str, str] | None = None) -> bool:
        memo = (action, resource, tuple(sorted((context or {}).items())))
        known = self._decisions.get(memo)
        if known is not None:
            return known
        allowed = False
        for statement in self.statements:
            if statement.conditional or not statement.matches(action, resource):
                continue
            if statement.condition and not statement.holds(context or {}):
                continue
            if statement.effect == "Deny":
                allowed = False
                break
            allowed = True
        if len(self._decisions) < 100_000:
            self._decisions[memo] = allowed
        return allowed


# The model ----------------------------------------------------------------------------------------------------------
@dataclass
class PolicyModel:
    functions: dict[str, FunctionPolicy]  # logical id -> its role's policies
    code_dirs: dict[str, str]  # code directory (e.g. functions/jobs) -> logical id

    def allowed(self, function: str, action: str, resource: str, context: Mapping[str, str] | None = None) -> bool:
        policy = self.functions.get(function)
        return policy is not None and policy.allowed(action, resource, context)

    def function_of(self, code_dir: str) -> str | None:
        return self.code_dirs.get(code_dir.rstrip("/"))

    @classmethod
    def build(
        cls, template: LocalTemplate, resources: Any = None, *, transformed_template: Mapping[str, Any] | None = None
    ) -> PolicyModel:
        """The grants of every function of `template` (its file transformed once per process, or
        `transformed_template`), with the physical names of `resources` (a `local.resources.Resources`)."""
        if resources is None:
            resources = planned_resources(template)
        cfn = transformed_template if transformed_template is not None else transformed(template)
        cfn_resources: Mapping[str, Any] = cfn.get("Resources") or {}

        def resolve(value: Any) -> Any:
            return template.resolve(value, ref=resources.ref, getatt=resources.getatt)

        attached: dict[str, list[Statement]] = {}  # role -> statements of AWS::IAM::Policy / ManagedPolicy resources
        for logical_id, resource in cfn_resources.items():
            if resource.get("Type") not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                continue
            props = resource.get("Properties") or {}
            for role in props.get("Roles") or []:
                name = _logical(role)
                if name:
                    attached.setdefault(name, []).extend(_document(logical_id, resolve(props.get("PolicyDocument"))))

        functions: dict[str, FunctionPolicy] = {}
        code_dirs: dict[str, str] = {}
        for logical_id, resource in cfn_resources.items():
            if resource.get("Type") != "AWS::Lambda::Function":
                continue
            props = resource.get("Properties") or {}
            role = _logical(props.get("Role"))
            if role is None or role not in cfn_resources:
                raise PolicyModelError(f"{logical_id}: its Role is not a role of the template")
            statements = _role_statements(role, cfn_resources[role], cfn_resources, resolve)
            statements += attached.get(role, [])
            functions[logical_id] = FunctionPolicy(logical_id, role, statements)
        for spec in template.functions:
            code_dirs[str(spec.code_dir).rstrip("/")] = spec.logical_id
        for logical_id, resource in template.of_type("AWS::Lambda::Function").items():
            code = (resource.get("Properties") or {}).get("Code")
            if isinstance(code, str):
                code_dirs[code.rstrip("/")] = logical_id
        return cls(functions=functions, code_dirs=code_dirs)


def _logical(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" and isinstance(arg, str):
            return arg
        if key == "Fn::GetAtt":
            return str(arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0])
    return None


def _document(policy: str, document: Any) -> list[Statement]:
    if not isinstance(document, Mapping):
        raise PolicyModelError(f"{policy}: the policy document is not a mapping")
    raw = document.get("Statement") or []
    if isinstance(raw, Mapping):
        raw = [raw]
    return [Statement.parse(policy, statement) for statement in raw]


def _role_statements(
    role: str, resource: Mapping[str, Any], cfn_resources: Mapping[str, Any], resolve: Any
) -> list[Statement]:
    props = resource.get("Properties") or {}
    statements: list[Statement] = []
    for policy in props.get("Policies") or []:
        name = f"{role}/{policy.get('PolicyName', '?')}"
        statements += _document(name, resolve(policy.get("PolicyDocument")))
    for arn in props.get("ManagedPolicyArns") or []:
        local = _logical(arn)
        if local is not None and local in cfn_resources:  # a customer managed policy of the template
            statements += _document(
                local, resolve((cfn_resources[local].get("Properties") or {}).get("PolicyDocument"))
            )
            continue
        name = str(resolve(arn)).rsplit("/", 1)[-1]
        if name not in MANAGED_POLICIES:
            raise PolicyModelError(
                f"{role}: managed policy {resolve(arn)} is not known to local/iam.py (add its document to "
                "MANAGED_POLICIES)"
            )
        statements += [Statement.parse(name, s) for s in MANAGED_POLICIES[name]]
    return statements


def planned_resources(template: LocalTemplate, prefix: str = "switchboard-local") -> Any:
    """The physical names the local stack would give the template's resources, without creating any."""
    from local.resources import Resources, _plan_names

    resources = Resources(template=template, prefix=prefix)
    _plan_names(resources)
    return resources


# ARNs ---------------------------------------------------------------------------------------------------------------
def table_arn(name: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{ARN_PREFIX}:table/{name}"


def queue_arn(url: str) -> str:
    """A queue URL (AWS's or moto's, `<scheme>://<host>/<account>/<name>`) → the queue's ARN."""
    if url.startswith("arn:"):
        return url
    account, name = url.rstrip("/").rsplit("/", 2)[-2:]
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


def bus_arn(name: str | None) -> str:
    name = name or "default"
    return name if name.startswith("arn:") else f"arn:aws:events:{ARN_PREFIX}:event-bus/{name}"


def object_arn(bucket: str, key: str | None = None) -> str:
    return f"arn:aws:s3:::{bucket}" if key is None else f"arn:aws:s3:::{bucket}/{key}"


def ses_identity_arns(address: str) -> tuple[str, ...]:
    """The identities SES may authorize a send from `address` as: the address itself, or its domain (whichever is
    the verified identity)."""
    address = address.strip()
    if "<" in address and address.endswith(">"):
        address = address.rsplit("<", 1)[1][:-1]
    domain = address.rsplit("@", 1)[-1]
    return tuple(dict.fromkeys(f"arn:aws:ses:{ARN_PREFIX}:identity/{x}" for x in (address, domain)))
