"""The local stack: moto's server as AWS, the template's resources, the gateway, and the event source pollers.

    with LocalStack(port=0) as stack:       # or stack.start() / stack.stop()
        info = stack.info                   # url, api_key, organization_id, owner_email, owner_password

Every function shares this process, so their environment (the same variable names for all of them) goes into
`os.environ`; `stop()` restores the environment it found, so the stack can also run inside a test process.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from local.functions import FunctionPool, FunctionRegistry, serialize_resolvers
from local.template import REGION, LocalTemplate, load_template

log = logging.getLogger("local.stack")

ROOT = Path(__file__).resolve().parent.parent
OWNER_EMAIL = "owner@example.com"
ORG_NAME = "Local Organization"
# Every local client is 127.0.0.1: a per-IP budget of the pre-session auth routes sized for a developer's whole stack.
LOCAL_LIMITS = {"AUTH_IP_LIMIT": "10000"}
_AWS_ENV_DROPPED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_DEFAULT_PROFILE")


class StackError(RuntimeError):
    """The stack cannot start for a reason the user can fix (e.g. the port is taken)."""


@dataclass(frozen=True)
class StackInfo:
    url: str
    api_key: str
    organization_id: str
    owner_email: str
    owner_password: str
    aws_endpoint_url: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _ensure_import_path() -> None:
    for path in (str(ROOT), str(ROOT / "layers" / "core")):
        if path not in sys.path:
            sys.path.insert(0, path)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=2, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


class LocalStack:
    def __init__(
        self,
        *,
        template_path: str | Path = ROOT / "template.yaml",
        host: str = "127.0.0.1",
        port: int = 3000,
        concurrency: int | None = None,
        prefix: str = "switchboard-local",
        http: bool = True,
        stream_pollers: bool = True,
        sqs_pollers: bool = True,
        api_key: str | None = None,
        owner_password: str | None = None,
    ) -> None:
        self.template_path = Path(template_path)
        self.host = host
        self.port = port
        self.concurrency = concurrency or int(os.environ.get("LOCAL_CONCURRENCY", "4"))
        self.prefix = prefix
        self.http = http
        self.stream_pollers = stream_pollers
        self.sqs_pollers = sqs_pollers
        self.api_key = api_key if api_key is not None else (os.environ.get("LOCAL_API_KEY") or None)
        self.owner_password = owner_password or os.environ.get("LOCAL_OWNER_PASSWORD") or secrets.token_urlsafe(12)

        self.template: LocalTemplate | None = None
        self.resources: Any = None
        self.functions: FunctionRegistry | None = None
        self.info: StackInfo | None = None
        self.pollers: list[threading.Thread] = []
        self._saved_env: dict[str, str] | None = None
        self._moto: Any = None
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._api_executor: ThreadPoolExecutor | None = None
        self._poller_executor: ThreadPoolExecutor | None = None
        self._sock: socket.socket | None = None
        self._iam_previous: Any = False  # the IAM model active before start (False: not activated)
        self._index_lag: Any = None

    # Lifecycle -----------------------------------------------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> StackInfo:
        started = time.perf_counter()
        _ensure_import_path()
        self._saved_env = dict(os.environ)
        try:
            if self.http:
                self._sock = self._bind()  # first, so that a busy port fails before any work
            endpoint = self._start_moto()
            self._point_boto3_at(endpoint)
            self.template = load_template(self.template_path, stage="local")
            from local.resources import create_resources

            self.resources = create_resources(self.template, prefix=self.prefix)
            self._check_iam()
            from local.ses import verify_sender

            verify_sender(self.template)  # what the operator does once per stage (docs/operations.md)
            self._set_function_env()
            bootstrapped = self._bootstrap()
            lag_ms = os.environ.get("LOCAL_INDEX_LAG_MS")
            if lag_ms and float(lag_ms) > 0:
                from local.index_lag import IndexLag

                self._index_lag = IndexLag(lag_ms=float(lag_ms)).install()
            serialize_resolvers()
            self.functions = self._build_functions()
            self.functions.warm()
            self._start_pollers()
            url = self._start_http() if self.http else ""
        except BaseException:
            self.stop()
            raise
        self.info = StackInfo(
            url=url,
            api_key=bootstrapped.api_key,
            organization_id=bootstrapped.organization_id,
            owner_email=bootstrapped.owner_email,
            owner_password=bootstrapped.owner_password,
            aws_endpoint_url=endpoint,
        )
        log.info("local stack started in %.2f s", time.perf_counter() - started)
        return self.info

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._server is not None:
            self._server.should_exit = True
        if self._server_thread is not None:
            self._server_thread.join(timeout=5)
            self._server_thread = None
        for poller in self.pollers:
            poller.join(timeout=5)
        self.pollers = []
        for executor in (self._api_executor, self._poller_executor):
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)
        if self._index_lag is not None:
            self._index_lag.uninstall()
            self._index_lag = None
        if self._moto is not None:
            try:
                self._moto.stop()
            except Exception:
                log.exception("moto server did not stop cleanly")
            self._moto = None
        if self._iam_previous is not False:
            from local.iam_recorder import CHECK

            CHECK.activate(self._iam_previous)
            self._iam_previous = False
        if self._saved_env is not None:
            os.environ.clear()
            os.environ.update(self._saved_env)
            self._saved_env = None
            self._reset_switchboard()

    def alive(self) -> bool:
        """False once the HTTP server thread died on its own."""
        return self._server_thread is None or self._server_thread.is_alive()

    # Steps ---------------------------------------------------------------------------------------------------------
    def _start_moto(self) -> str:
        from local.moto_server import LocalMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._moto = LocalMotoServer(ip_address="127.0.0.1", port=0)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        return f"http://{host}:{port}"

    @staticmethod
    def _point_boto3_at(endpoint: str) -> None:
        for name in list(os.environ):
            if name.startswith("AWS_ENDPOINT_URL_") or name in _AWS_ENV_DROPPED:
                del os.environ[name]
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
            }
        )

    def _check_iam(self) -> None:
        """Every AWS call a function makes is checked against its IAM grants (local/iam_recorder.py): an ungranted
        call is logged (`SWITCHBOARD_IAM_UNGRANTED {...}`) and, with IAM_CHECK=fail (the default), fails with
        AccessDenied as it would on AWS."""
        from local.iam import PolicyModel
        from local.iam_recorder import CHECK, install

        assert self.template is not None
        install()
        checked = os.environ.get("IAM_CHECK") != "off"
        self._iam_previous = CHECK.activate(PolicyModel.build(self.template, self.resources) if checked else None)

    def _set_function_env(self) -> None:
        assert self.template is not None
        merged: dict[str, str] = {}
        for spec in self.template.functions:
            for name, value in self.resources.function_env(spec).items():
                if name in merged and merged[name] != value:
                    log.warning("%s differs between functions; the local stack uses one value (%s)", name, spec)
                merged.setdefault(name, value)
        if self._sock is not None and not merged.get("PUBLIC_BASE_URL"):  # engines' webhooks reach this stack
            host, port = self._sock.getsockname()[:2]
            merged["PUBLIC_BASE_URL"] = f"http://{host}:{port}"
        merged.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
        merged.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        for name, value in LOCAL_LIMITS.items():  # unless the environment sets them
            merged.setdefault(name, os.environ.get(name, value))
        commit = os.environ.get("GIT_COMMIT") or _git_commit()
        if commit:
            merged.setdefault("GIT_COMMIT", commit)
        os.environ.update(merged)
        self._reset_switchboard()

    @staticmethod
    def _reset_switchboard() -> None:
        if "switchboard" not in sys.modules:
            return
        from switchboard.aws import reset_clients
        from switchboard.config import reset_settings

        reset_settings()
        reset_clients()

    def _bootstrap(self) -> Any:
        from switchboard.identity.bootstrap import bootstrap_organization
        from switchboard.store import get_store

        return bootstrap_organization(
            get_store(),
            org_name=ORG_NAME,
            owner_email=OWNER_EMAIL,
            owner_password=self.owner_password,
            api_key=self.api_key,
            key_mode="test",
        )

    def _build_functions(self) -> FunctionRegistry:
        assert self.template is not None
        pools = {
            spec.logical_id: FunctionPool(
                spec,
                root=self.template.root,
                size=self.concurrency,
                function_name=self.resources.function_name(spec.logical_id),
                function_arn=self.resources.function_arn(spec.logical_id),
            )
            for spec in self.template.functions
        }
        for spec in self.template.functions:
            for name, kind in spec.other_events:
                log.warning("%s.%s: %s events are not played by the local stack", spec.logical_id, name, kind)
        return FunctionRegistry(pools)

    def _start_pollers(self) -> None:
        import boto3

        from local.pollers import SqsPoller, StreamPoller

        assert self.template is not None and self.functions is not None
        session = boto3.session.Session()
        streams = session.client("dynamodbstreams", region_name=REGION)
        sqs = session.client("sqs", region_name=REGION)
        sqs_mappings = [(spec, m) for spec in self.template.functions for m in spec.sqs_events if m.enabled]
        if sqs_mappings and self.sqs_pollers:
            self._poller_executor = ThreadPoolExecutor(
                max_workers=max(4, self.concurrency * len(sqs_mappings)), thread_name_prefix="sqs-batch"
            )
        for spec in self.template.functions:
            pool = self.functions[spec.logical_id]
            for stream_mapping in spec.stream_events if self.stream_pollers else ():
                if not stream_mapping.enabled:
                    continue
                on_failure = stream_mapping.on_failure
                self.pollers.append(
                    StreamPoller(
                        pool=pool,
                        mapping=stream_mapping,
                        stream_arn=self.resources.stream_arn(stream_mapping.table),
                        streams_client=streams,
                        sqs_client=sqs,
                        on_failure_url=self.resources.physical.get(on_failure) if on_failure else None,
                        stop=self._stop,
                    )
                )
            if self._poller_executor is None:
                continue
            for sqs_mapping in spec.sqs_events:
                if not sqs_mapping.enabled:
                    continue
                self.pollers.append(
                    SqsPoller(
                        pool=pool,
                        mapping=sqs_mapping,
                        queue_url=self.resources.queue_url(sqs_mapping.queue),
                        queue_arn=self.resources.queue_arn(sqs_mapping.queue),
                        sqs_client=sqs,
                        executor=self._poller_executor,
                        concurrency=self.concurrency,
                        stop=self._stop,
                    )
                )
        for poller in self.pollers:
            poller.start()

    def _bind(self) -> socket.socket:
        # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets whose proto says TCP (without it, every
        # keep-alive response waits ~40 ms for a delayed ACK).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as err:
            sock.close()
            raise StackError(f"cannot listen on {self.host}:{self.port}: {err.strerror}") from None
        return sock

    def _start_http(self) -> str:
        import uvicorn

        from local.gateway import Gateway

        assert self.template is not None and self.functions is not None
        sock, self._sock = self._sock, None
        assert sock is not None
        port = sock.getsockname()[1]
        self._api_executor = ThreadPoolExecutor(
            max_workers=max(32, self.concurrency * len(self.template.functions) * 2), thread_name_prefix="lambda"
        )
        timeout = float(os.environ.get("LOCAL_INTEGRATION_TIMEOUT", "29"))
        app = Gateway(
            self.template,
            self.functions,
            executor=self._api_executor,
            mail_reader=_read_mail,
            integration_timeout=timeout,
        )
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=3,
            timeout_keep_alive=30,
            # The gateway takes the source IP from the socket peer (`LOCAL_TRUSTED_PROXIES` aside), as API Gateway
            # does: uvicorn must not rewrite the peer from a client's X-Forwarded-For.
            proxy_headers=False,
        )
        self._server = uvicorn.Server(config)
        self._server_thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="gateway", daemon=True
        )
        self._server_thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._server_thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        return f"http://{self.host}:{port}"


def _read_mail(to: str | None) -> list[dict[str, Any]]:
    from local.ses import sent_mail

    return sent_mail(to)
