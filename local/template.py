"""`template.yaml` as the local stack needs it: resources, SAM Globals, intrinsic functions and function specs.

`load_template()` reads the file once (CloudFormation short-form tags such as `!Ref` and `!Sub` become their long
forms), applies the SAM `Globals`, drops resources whose `Condition` is false, and describes every function: its
code, handler, environment, API routes and event source mappings. Values that depend on physical resources
(`!Ref Table`, `!GetAtt Queue.Arn`, `{{resolve:secretsmanager:...}}`) are resolved later with
`LocalTemplate.resolve()`, once `local.resources` knows the physical names.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account: ARNs built here must equal the ones moto returns
DEFAULT_STAGE = "local"
# What the local stack deploys with for the parameters a real stage must be given (no default in template.yaml).
LOCAL_PARAMETERS = {"MailSender": "no-reply@switchboard.local"}

NO_VALUE = object()  # AWS::NoValue: the enclosing key or list item disappears


class TemplateError(ValueError):
    """The template uses something the local stack cannot interpret."""


# YAML ---------------------------------------------------------------------------------------------------------------
# libyaml's parser when PyYAML was built with it (its wheels are): about 12x faster on template.yaml, which every
# integration test's setup reads
_SafeLoader: Any = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class _CfnLoader(_SafeLoader):  # type: ignore[misc]
    """SafeLoader that understands CloudFormation's short-form tags and keeps dates as strings (as CFN does)."""


_CfnLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_tag(loader: Any, suffix: str, node: yaml.Node) -> Any:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:  # pragma: no cover - yaml has no other node kinds
        raise TemplateError(f"unsupported node for !{suffix}")
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _construct_tag)


def parse_yaml(text: str) -> dict[str, Any]:
    data = yaml.load(text, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict):
        raise TemplateError("the template is not a mapping")
    return data


# Specs --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ApiEvent:
    """One `Type: Api` event: a method and path of the REST API routed to the function."""

    name: str
    method: str  # upper case; "ANY" matches every method
    path: str
    authorizer: str | None  # the authorizer's name, None for a public route (Auth.Authorizer: NONE)

    @property
    def auth_none(self) -> bool:
        return self.authorizer is None


@dataclass(frozen=True)
class SqsEvent:
    name: str
    queue: str  # logical id of the AWS::SQS::Queue
    batch_size: int
    report_batch_item_failures: bool
    maximum_batching_window: float
    filters: tuple[dict[str, Any], ...] = ()
    enabled: bool = True


@dataclass(frozen=True)
class StreamEvent:
    name: str
    table: str  # logical id of the table whose stream feeds the function
    batch_size: int
    report_batch_item_failures: bool
    starting_position: str
    filters: tuple[dict[str, Any], ...] = ()
    maximum_retry_attempts: int = -1  # -1: until the record expires (bounded locally, see local.pollers)
    bisect_on_error: bool = False
    on_failure: str | None = None  # logical id of the on-failure destination queue
    maximum_batching_window: float = 0.0
    enabled: bool = True


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path  # relative to the repository root, e.g. functions/system
    module: str  # e.g. functions.system.app
    handler: str  # the attribute of the module, e.g. handler
    timeout: int
    memory: int
    environment: dict[str, Any]  # Globals + function variables, intrinsics not yet resolved
    api_events: tuple[ApiEvent, ...] = ()
    sqs_events: tuple[SqsEvent, ...] = ()
    stream_events: tuple[StreamEvent, ...] = ()
    other_events: tuple[tuple[str, str], ...] = ()  # (name, type) of events the local stack does not play

    @property
    def app_file(self) -> Path:
        return self.code_dir / (self.module.rsplit(".", 1)[-1] + ".py")


@dataclass(frozen=True)
class AuthorizerSpec:
    name: str
    function: str  # logical id of the authorizer function
    payload_type: str  # REQUEST or TOKEN
    identity_headers: tuple[str, ...] = ()
    reauthorize_every: int = 0


@dataclass(frozen=True)
class GatewayResponseSpec:
    response_type: str
    status_code: int | None
    templates: dict[str, str] = field(default_factory=dict)  # content type -> template
    headers: dict[str, str] = field(default_factory=dict)  # header -> value expression ("'static'" or a mapping)


# The template -------------------------------------------------------------------------------------------------------
@dataclass
class LocalTemplate:
    path: Path
    raw: dict[str, Any]
    stage: str
    parameters: dict[str, Any]
    conditions: dict[str, bool]
    resources: dict[str, dict[str, Any]]  # logical id -> resource (Globals applied, false conditions removed)
    functions: list[FunctionSpec]
    authorizers: dict[str, AuthorizerSpec]
    gateway_responses: dict[str, GatewayResponseSpec]

    @property
    def root(self) -> Path:
        return self.path.parent

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {lid: r for lid, r in self.resources.items() if r.get("Type") == resource_type}

    def function(self, logical_id: str) -> FunctionSpec:
        for spec in self.functions:
            if spec.logical_id == logical_id:
                return spec
        raise KeyError(logical_id)

    def pseudo_parameters(self) -> dict[str, Any]:
        return {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": f"switchboard-{self.stage}",
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/switchboard-{self.stage}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NotificationARNs": [],
            "AWS::NoValue": NO_VALUE,
        }

    def resolve(
        self,
        value: Any,
        *,
        ref: Callable[[str], Any] | None = None,
        getatt: Callable[[str, str], Any] | None = None,
        dynamic: Callable[[str], str] | None = None,
    ) -> Any:
        """Evaluate every intrinsic function in `value`.

        `ref(logical_id)` and `getatt(logical_id, attribute)` give physical values of resources (default: a
        recognisable placeholder); `dynamic(reference)` resolves `{{resolve:...}}` dynamic references.
        """
        return _Evaluator(self, ref, getatt, dynamic).eval(value)


def load_template(path: str | Path = "template.yaml", stage: str = DEFAULT_STAGE, **overrides: Any) -> LocalTemplate:
    """Read `template.yaml` for the local stack (parameter `Stage` = `stage`, other parameters at their defaults, or
    the local value of a parameter without one: `LOCAL_PARAMETERS`)."""
    path = Path(path)
    if not path.is_absolute() and not path.exists():
        candidate = Path(__file__).resolve().parent.parent / path
        if candidate.exists():
            path = candidate
    path = path.resolve()
    raw = parse_yaml(path.read_text())

    parameters: dict[str, Any] = {}
    for name, spec in (raw.get("Parameters") or {}).items():
        if name in overrides:
            parameters[name] = str(overrides[name])
        elif name == "Stage":
            parameters[name] = stage
        elif "Default" in spec:
            default = spec["Default"]
            if spec.get("Type") == "CommaDelimitedList" and isinstance(default, str):
                parameters[name] = [part.strip() for part in default.split(",")]
            else:
                parameters[name] = str(default) if not isinstance(default, list) else default
        elif name in LOCAL_PARAMETERS:
            parameters[name] = LOCAL_PARAMETERS[name]
        else:
            raise TemplateError(f"parameter {name} has no default; pass it to load_template()")

    tpl = LocalTemplate(
        path=path,
        raw=raw,
        stage=stage,
        parameters=parameters,
        conditions={},
        resources={},
        functions=[],
        authorizers={},
        gateway_responses={},
    )
    tpl.conditions = _evaluate_conditions(tpl)

    globals_fn = (raw.get("Globals") or {}).get("Function") or {}
    for logical_id, resource in (raw.get("Resources") or {}).items():
        condition = resource.get("Condition")
        if condition is not None and not tpl.conditions.get(condition, False):
            continue
        resource = copy.deepcopy(resource)
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"] = _merge_globals(globals_fn, resource.get("Properties") or {})
        tpl.resources[logical_id] = resource

    tpl.authorizers = _authorizers(tpl)
    tpl.functions = [_function_spec(tpl, lid, r) for lid, r in tpl.of_type("AWS::Serverless::Function").items()]
    tpl.gateway_responses = _gateway_responses(tpl)
    return tpl


# Globals --------------------------------------------------------------------------------------------------------
def _merge_globals(globals_section: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """SAM's rules: maps merge (the resource wins), lists concatenate, scalars are replaced."""
    merged: dict[str, Any] = copy.deepcopy(dict(globals_section))
    for key, value in properties.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict) and not _is_intrinsic(value):
            merged[key] = _merge_globals(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = current + copy.deepcopy(value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref", "Condition"))


# Conditions -----------------------------------------------------------------------------------------------------
def _evaluate_conditions(tpl: LocalTemplate) -> dict[str, bool]:
    raw = tpl.raw.get("Conditions") or {}
    done: dict[str, bool] = {}

    def condition(name: str, stack: tuple[str, ...] = ()) -> bool:
        if name in done:
            return done[name]
        if name in stack:
            raise TemplateError(f"condition {name} refers to itself")
        if name not in raw:
            raise TemplateError(f"unknown condition {name}")
        result = bool(_Evaluator(tpl, None, None, None, lambda n: condition(n, (*stack, name))).eval(raw[name]))
        done[name] = result
        return result

    for name in raw:
        condition(name)
    return done


# Intrinsic functions --------------------------------------------------------------------------------------------
_SUB_VAR = re.compile(r"\$\{([^}]*)\}")
_DYNAMIC_REF = re.compile(r"\{\{resolve:[^}]+\}\}")


class _Evaluator:
    def __init__(
        self,
        tpl: LocalTemplate,
        ref: Callable[[str], Any] | None,
        getatt: Callable[[str, str], Any] | None,
        dynamic: Callable[[str], str] | None,
        condition: Callable[[str], bool] | None = None,
    ) -> None:
        self.tpl = tpl
        self._ref = ref
        self._getatt = getatt
        self._dynamic = dynamic
        self._condition = condition or (lambda name: tpl.conditions[name])

    def eval(self, value: Any) -> Any:
        result = self._eval(value)
        return None if result is NO_VALUE else result

    def _eval(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self._eval(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if isinstance(value, str):
            return self._dynamic_refs(value)
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Condition" and isinstance(arg, str):
                return self._condition(arg)
            if key.startswith("Fn::"):
                return self._function(key[4:], arg)
        out = {}
        for k, v in value.items():
            evaluated = self._eval(v)
            if evaluated is not NO_VALUE:
                out[k] = evaluated
        return out

    def _dynamic_refs(self, text: str) -> str:
        if "{{resolve:" not in text or self._dynamic is None:
            return text
        dynamic = self._dynamic
        return _DYNAMIC_REF.sub(lambda m: dynamic(m.group(0)), text)

    def ref(self, name: str) -> Any:
        if name in self.tpl.parameters:
            return self.tpl.parameters[name]
        pseudo = self.tpl.pseudo_parameters()
        if name in pseudo:
            return pseudo[name]
        if self._ref is not None:
            return self._ref(name)
        return f"local-ref-{name}"

    def getatt(self, resource: str, attribute: str) -> Any:
        if self._getatt is not None:
            return self._getatt(resource, attribute)
        return f"local-getatt-{resource}.{attribute}"

    def _function(self, name: str, arg: Any) -> Any:
        if name == "GetAtt":
            if isinstance(arg, str):
                arg = arg.split(".", 1)
            resource, attribute = self._eval(arg[0]), self._eval(arg[1])
            return self.getatt(resource, attribute)
        if name == "Sub":
            return self._sub(arg)
        if name == "Join":
            sep, items = arg
            values = self._eval(items)
            return self._eval(sep).join(str(v) for v in values)
        if name == "Select":
            index, items = arg
            return self._eval(items)[int(self._eval(index))]
        if name == "Split":
            sep, text = arg
            return str(self._eval(text)).split(self._eval(sep))
        if name == "If":
            cond, when_true, when_false = arg
            return self._eval(when_true if self._condition(cond) else when_false)
        if name == "Equals":
            left, right = (self._eval(v) for v in arg)
            return str(left) == str(right)
        if name == "Not":
            return not self._truthy(arg[0])
        if name == "And":
            return all(self._truthy(v) for v in arg)
        if name == "Or":
            return any(self._truthy(v) for v in arg)
        if name == "FindInMap":
            map_name, top, second = (self._eval(v) for v in arg[:3])
            try:
                return self.tpl.raw["Mappings"][map_name][top][second]
            except KeyError:
                if len(arg) > 3 and isinstance(arg[3], dict) and "DefaultValue" in arg[3]:
                    return self._eval(arg[3]["DefaultValue"])
                raise TemplateError(f"!FindInMap [{map_name}, {top}, {second}] has no value") from None
        if name == "Base64":
            import base64

            return base64.b64encode(str(self._eval(arg)).encode()).decode()
        if name == "GetAZs":
            return [f"{REGION}{zone}" for zone in "abc"]
        if name == "ToJsonString":
            return json.dumps(self._eval(arg), separators=(",", ":"))
        if name == "Length":
            return len(self._eval(arg))
        raise TemplateError(f"Fn::{name} is not supported by the local stack")

    def _truthy(self, value: Any) -> bool:
        evaluated = self._eval(value)
        if isinstance(evaluated, str):
            return evaluated.lower() == "true"
        return bool(evaluated)

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            template, variables = arg[0], {k: self._eval(v) for k, v in (arg[1] or {}).items()}
        else:
            template, variables = arg, {}

        def replace(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr.startswith("!"):
                return "${" + expr[1:] + "}"
            if expr in variables:
                return str(variables[expr])
            if "." in expr and expr.split(".", 1)[0] not in self.tpl.parameters:
                resource, attribute = expr.split(".", 1)
                return str(self.getatt(resource, attribute))
            return str(self.ref(expr))

        return self._dynamic_refs(_SUB_VAR.sub(replace, template))


# Function specs -------------------------------------------------------------------------------------------------
def _logical_of(value: Any) -> str | None:
    """`!Ref X` / `!GetAtt X.Attr` → X (the resource a property points at), else None."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" and isinstance(arg, str):
            return arg
        if key == "Fn::GetAtt":
            return str(arg[0] if isinstance(arg, list) else arg.split(".", 1)[0])
    return None


MAX_FILTERS = 5  # Lambda's default quota of filters per event source mapping; it refuses to create one with more


def _filters(tpl: LocalTemplate, props: Mapping[str, Any], where: str) -> tuple[dict[str, Any], ...]:
    criteria = tpl.resolve(props.get("FilterCriteria") or {})
    if len(criteria.get("Filters") or []) > MAX_FILTERS:
        raise TemplateError(
            f"{where}: {len(criteria['Filters'])} FilterCriteria filters; Lambda allows {MAX_FILTERS} per event "
            "source mapping"
        )
    out = []
    for item in criteria.get("Filters") or []:
        pattern = item.get("Pattern")
        out.append(json.loads(pattern) if isinstance(pattern, str) else dict(pattern or {}))
    return tuple(out)


def _api_default_authorizer(tpl: LocalTemplate, rest_api: str | None) -> str | None:
    apis = tpl.of_type("AWS::Serverless::Api")
    api = apis.get(rest_api) if rest_api else (next(iter(apis.values())) if len(apis) == 1 else None)
    if api is None:
        return None
    auth = (api.get("Properties") or {}).get("Auth") or {}
    default = auth.get("DefaultAuthorizer")
    return None if default in (None, "NONE", "AWS_IAM") else str(default)


def _function_spec(tpl: LocalTemplate, logical_id: str, resource: Mapping[str, Any]) -> FunctionSpec:
    props = resource.get("Properties") or {}
    code_uri = tpl.resolve(props.get("CodeUri"))
    handler = tpl.resolve(props.get("Handler"))
    if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"{logical_id}: the local stack needs a local CodeUri and a module.attr Handler")
    code_dir = Path(code_uri.rstrip("/"))
    module_file, _, attr = handler.rpartition(".")
    module = ".".join([*code_dir.parts, *module_file.split("/")])

    api_events: list[ApiEvent] = []
    sqs_events: list[SqsEvent] = []
    stream_events: list[StreamEvent] = []
    other_events: list[tuple[str, str]] = []
    for name, event in (props.get("Events") or {}).items():
        kind = event.get("Type")
        eprops = event.get("Properties") or {}
        enabled = tpl.resolve(eprops.get("Enabled", True)) not in (False, "false", "False")
        report = "ReportBatchItemFailures" in (tpl.resolve(eprops.get("FunctionResponseTypes")) or [])
        if kind == "Api":
            rest_api = _logical_of(eprops.get("RestApiId"))
            auth = eprops.get("Auth") or {}
            authorizer = auth.get("Authorizer") or _api_default_authorizer(tpl, rest_api)
            api_events.append(
                ApiEvent(
                    name=name,
                    method=str(tpl.resolve(eprops["Method"])).upper(),
                    path=str(tpl.resolve(eprops["Path"])),
                    authorizer=None if authorizer in (None, "NONE") else str(authorizer),
                )
            )
        elif kind == "SQS":
            queue = _logical_of(eprops.get("Queue"))
            if queue is None:
                raise TemplateError(f"{logical_id}.{name}: the queue must be !GetAtt <Queue>.Arn")
            sqs_events.append(
                SqsEvent(
                    name=name,
                    queue=queue,
                    batch_size=int(tpl.resolve(eprops.get("BatchSize", 10))),
                    report_batch_item_failures=report,
                    maximum_batching_window=float(tpl.resolve(eprops.get("MaximumBatchingWindowInSeconds", 0))),
                    filters=_filters(tpl, eprops, f"{logical_id}.{name}"),
                    enabled=enabled,
                )
            )
        elif kind == "DynamoDB":
            table = _logical_of(eprops.get("Stream"))
            if table is None:
                raise TemplateError(f"{logical_id}.{name}: the stream must be !GetAtt <Table>.StreamArn")
            destination = ((eprops.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            stream_events.append(
                StreamEvent(
                    name=name,
                    table=table,
                    batch_size=int(tpl.resolve(eprops.get("BatchSize", 100))),
                    report_batch_item_failures=report,
                    starting_position=str(tpl.resolve(eprops.get("StartingPosition", "LATEST"))),
                    filters=_filters(tpl, eprops, f"{logical_id}.{name}"),
                    maximum_retry_attempts=int(tpl.resolve(eprops.get("MaximumRetryAttempts", -1))),
                    bisect_on_error=bool(tpl.resolve(eprops.get("BisectBatchOnFunctionError", False))),
                    on_failure=_logical_of(destination),
                    maximum_batching_window=float(tpl.resolve(eprops.get("MaximumBatchingWindowInSeconds", 0))),
                    enabled=enabled,
                )
            )
        else:
            other_events.append((name, str(kind)))

    return FunctionSpec(
        logical_id=logical_id,
        code_dir=code_dir,
        module=module,
        handler=attr,
        timeout=int(tpl.resolve(props.get("Timeout", 3))),
        memory=int(tpl.resolve(props.get("MemorySize", 128))),
        environment=dict((props.get("Environment") or {}).get("Variables") or {}),
        api_events=tuple(api_events),
        sqs_events=tuple(sqs_events),
        stream_events=tuple(stream_events),
        other_events=tuple(other_events),
    )


def _authorizers(tpl: LocalTemplate) -> dict[str, AuthorizerSpec]:
    out: dict[str, AuthorizerSpec] = {}
    for api_id, api in tpl.of_type("AWS::Serverless::Api").items():
        auth = (api.get("Properties") or {}).get("Auth") or {}
        for name, spec in (auth.get("Authorizers") or {}).items():
            function = _logical_of(spec.get("FunctionArn"))
            if function is None:
                raise TemplateError(f"{api_id}: authorizer {name} must use !GetAtt <Function>.Arn")
            identity = spec.get("Identity") or {}
            out[name] = AuthorizerSpec(
                name=name,
                function=function,
                payload_type=str(spec.get("FunctionPayloadType", "TOKEN")).upper(),
                identity_headers=tuple(
                    identity.get("Headers") or ([identity["Header"]] if "Header" in identity else [])
                ),
                reauthorize_every=int(tpl.resolve(identity.get("ReauthorizeEvery", 300))),
            )
    return out


def _gateway_responses(tpl: LocalTemplate) -> dict[str, GatewayResponseSpec]:
    out: dict[str, GatewayResponseSpec] = {}
    for resource in tpl.of_type("AWS::ApiGateway::GatewayResponse").values():
        props = tpl.resolve(resource.get("Properties") or {})
        response_type = str(props["ResponseType"])
        status = props.get("StatusCode")
        out[response_type] = GatewayResponseSpec(
            response_type=response_type,
            status_code=int(status) if status not in (None, "") else None,
            templates={str(k): str(v) for k, v in (props.get("ResponseTemplates") or {}).items()},
            headers={
                key.removeprefix("gatewayresponse.header."): str(value)
                for key, value in (props.get("ResponseParameters") or {}).items()
                if key.startswith("gatewayresponse.header.")
            },
        )
    # SAM's inline form: Api.Properties.GatewayResponses
    for api in tpl.of_type("AWS::Serverless::Api").values():
        for response_type, spec in ((api.get("Properties") or {}).get("GatewayResponses") or {}).items():
            spec = tpl.resolve(spec or {})
            headers = (spec.get("ResponseParameters") or {}).get("Headers") or {}
            status = spec.get("StatusCode")
            out.setdefault(
                response_type,
                GatewayResponseSpec(
                    response_type=response_type,
                    status_code=int(status) if status not in (None, "") else None,
                    templates={str(k): str(v) for k, v in (spec.get("ResponseTemplates") or {}).items()},
                    headers={str(k): str(v) for k, v in headers.items()},
                ),
            )
    return out
