"""The contract runner behind `mnemon plugin test`: it certifies a plugin over the wire only.

The runner launches the plugin (or targets an endpoint), then runs its checks in order. A check
whose premise failed is skipped with the reason; the plugin is certified when no check failed.
Real turns run through a `MemoryHost` with the client Source, so answers are judged by the
core's own validators, exactly as a host would judge them.
"""

from __future__ import annotations

import json
import os
import secrets as _secrets
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import orjson
from jsonschema import Draft202012Validator

from mnemon import MemoryHost
from mnemon.sdk import (
    ActionError,
    DefinitionError,
    MnemonError,
    PluginContext,
    RouteError,
    define_memory_strategy,
    describe_schema_error,
    install_memory,
)

from ._answers import AnswerTooLarge, read_bounded
from ._client import RemoteSettings, define_remote_source
from ._launch import (
    CONFIGURATION_VARIABLE,
    MNEMON_RUN,
    LaunchedPlugin,
    PluginUnavailable,
    launch_plugin,
)
from ._manifest import (
    PLUGIN_API_VERSIONS,
    ManifestReport,
    engine_version,
    inspect_manifest,
    load_schema,
)
from ._recording import Exchange, RecordingTransport
from ._report import CHECKS, MNEMON_CHECKS, CheckResult, report_validator, summarize, timed
from ._wire import CALLS, DISCOVERY, HEALTH, error_class_contradicts, parse_envelope

__all__ = [
    "certify",
    "check_compatibility",
    "check_discovery",
    "check_health",
    "check_manifest",
    "development_run",
    "invoke_fixture",
    "load_fixture",
]

CONTRACT_KEY = "source:contract"
_TIMEOUT_CODES = {"timeout"}
_MARKER = "{marker}"


def _compose(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
    share = request.budget.max_projection_characters // max(1, len(sources))
    return {
        "strategy_type_id": "contract",
        "explanation": "The contract runner selects every Source with all it offers.",
        "sources": [
            {
                "source_key": s.key,
                "required": False,
                "projection": {"mode": "eager", "max_characters": share},
                "route_ids": [r.id for r in s.routes],
                "action_ids": [a.id for a in s.actions],
            }
            for s in sources
        ],
    }


CONTRACT_STRATEGY = define_memory_strategy(
    {
        "type_id": "contract",
        "package_name": "mnemon-remote",
        "supported_source_roles": ["*"],
        "max_sources": 8,
        "max_routes": 64,
        "max_actions": 64,
    },
    _compose,
)


@dataclass
class _Target:
    """One plugin process the runner talks to: where, with which caller secret."""

    base_url: str
    token: str
    launched: LaunchedPlugin | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}


class _ContractPlugin:
    def __init__(self, transport: RecordingTransport, target: _Target | None = None) -> None:
        self._transport = transport
        self._target = target

    def apply(self, ctx: PluginContext) -> None:
        if self._target is None:
            install_memory(ctx, strategies=[CONTRACT_STRATEGY])
            return
        settings = RemoteSettings(ctx.configuration, token=self._target.token)
        install_memory(ctx, sources=[define_remote_source(settings, self._transport)])


def _configuration_key(configuration: Mapping[str, Any]) -> str:
    return json.dumps(configuration, sort_keys=True)


@dataclass
class _Run:
    directory: Path
    report: ManifestReport
    startup_timeout: float = 10.0
    fixtures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    mode: str = "launch"
    endpoint: str | None = None
    token: str | None = None
    #: where a launched plugin's stdout and stderr go (a file, or a descriptor)
    output: IO[bytes] | int | None = None
    port: int | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    transport: RecordingTransport = field(default_factory=RecordingTransport)
    probes: list[Exchange] = field(default_factory=list)
    results: dict[str, CheckResult] = field(default_factory=dict)
    #: the plugin processes, one per configuration the fixtures use (one for an endpoint)
    targets: dict[str, _Target | None] = field(default_factory=dict)

    def check(self, check_id: str) -> CheckResult:
        return self.results.setdefault(check_id, MNEMON_CHECKS.result(check_id))

    @property
    def base_url(self) -> str:
        """The first plugin process's base URL, or an empty string when none answered."""
        first = next(iter(self.targets.values()), None)
        return "" if first is None else first.base_url

    def by_base(self, base: str) -> _Target | None:
        return next((t for t in self.targets.values() if t and t.base_url == base), None)

    async def target(self, configuration: Mapping[str, Any]) -> _Target | None:
        """The plugin process serving `configuration`; launched on first use (None: it failed).

        A plugin takes its configuration only at start, so each configuration the fixtures
        use gets its own process. A running plugin at an endpoint has its own configuration.
        """
        key = "" if self.endpoint is not None else _configuration_key(configuration)
        if key not in self.targets:
            if self.endpoint is not None:
                assert self.token is not None  # certify() refuses an endpoint without one
                self.targets[key] = _Target(self.endpoint.rstrip("/"), self.token)
            else:
                self.targets[key] = await self._launch(configuration)
        return self.targets[key]

    async def _launch(self, configuration: Mapping[str, Any]) -> _Target | None:
        command = [str(part) for part in (self.report.manifest or {})["run"]["command"]]
        try:
            launched = await launch_plugin(
                self.report.path,
                command,
                secrets=self.secrets,
                variables={CONFIGURATION_VARIABLE: json.dumps(dict(configuration))},
                startup_timeout=self.startup_timeout,
                port=self.port,
                stdout=self.output,
                stderr=self.output,
            )
        except PluginUnavailable:
            return None
        assert launched.token is not None  # the run convention gives one
        return _Target(launched.endpoint, launched.token, launched)

    def launched(self) -> list[LaunchedPlugin]:
        """The plugin processes the run launched."""
        return [t.launched for t in self.targets.values() if t and t.launched is not None]

    async def stop(self) -> None:
        for target in self.targets.values():
            if target is not None and target.launched is not None:
                await target.launched.stop()


def _pointer(path: str) -> str:
    return (
        ""
        if path == "(manifest)"
        else "/" + path.replace(".", "/").replace("[", "/").rstrip("]").replace("]", "")
    )


def check_manifest(run: _Run) -> bool:
    result = run.check("manifest")
    for issue in run.report.issues:
        if not issue.code.startswith("incompatible_"):
            result.issue(issue.code, _pointer(issue.path), issue.message)
    return result.status == "pass"


def check_compatibility(run: _Run) -> bool:
    result = run.check("compatibility")
    for issue in run.report.issues:
        if issue.code.startswith("incompatible_"):
            result.issue(issue.code, _pointer(issue.path), issue.message)
    return result.status == "pass"


async def _request(
    run: _Run,
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Mapping[str, str],
    content: bytes | None = None,
) -> tuple[int, bytes]:
    """One exchange with the plugin, under its deadline, its answer read up to its limit.

    Raises:
        httpx.HTTPError: the plugin did not answer.
        TimeoutError: not within `timeout_ms`.
        AnswerTooLarge: the answer passed `max_response_bytes` (reading stopped there).
    """
    with anyio.fail_after(run.report.timeout_seconds):
        async with client.stream(method, url, headers=headers, content=content) as response:
            limit = run.report.max_response_bytes
            return response.status_code, await read_bounded(response.aiter_bytes(), limit)


async def check_health(run: _Run, client: httpx.AsyncClient, target: _Target) -> None:
    result = run.check("health")
    with timed(result):
        try:
            status, body = await _request(
                run, client, "GET", target.base_url + HEALTH, target.headers
            )
        except (httpx.HTTPError, TimeoutError, AnswerTooLarge):
            result.issue("plugin_unavailable", HEALTH, "GET /v0/health did not answer")
            return
        if status != 200 or _json(body) != {"status": "ok"}:
            result.issue(
                "unhealthy",
                HEALTH,
                f'GET /v0/health answered {status}, not 200 {{"status":"ok"}}',
            )


async def check_discovery(run: _Run, client: httpx.AsyncClient, target: _Target) -> bool:
    result = run.check("discovery")
    with timed(result):
        try:
            status, body = await _request(
                run, client, "GET", target.base_url + DISCOVERY, target.headers
            )
        except AnswerTooLarge:
            result.issue("response_too_large", DISCOVERY, "the answer exceeds max_response_bytes")
            return False
        except (httpx.HTTPError, TimeoutError):
            result.issue("plugin_unavailable", DISCOVERY, "GET /v0/discovery did not answer")
            return False
        value = _json(body)
        if status != 200:
            result.issue("schema_violation", DISCOVERY, f"the discovery answer is HTTP {status}")
            return False
        validator = Draft202012Validator(load_schema("discovery.schema.json"))
        broken = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path)))
        for error in broken[:3]:
            where = "/" + "/".join(map(str, error.absolute_path))
            rule = describe_schema_error(error)
            result.issue("schema_violation", DISCOVERY, f"the answer at {where}: {rule}")
        if broken:
            return False
        expected = {
            "/plugin_api": (value["plugin_api"], run.report.plugin_api),
            "/plugin/id": (value["plugin"]["id"], run.report.plugin_id),
            "/plugin/version": (value["plugin"]["version"], run.report.version),
            "/manifest_digest": (value["manifest_digest"], run.report.digest),
        }
        for path, (got, wanted) in expected.items():
            if got != wanted:
                result.issue("discovery_mismatch", path, f"{path} differs from the manifest")
        if value["contributions"] != ["source"]:
            result.issue("discovery_mismatch", "/contributions", "contributions must be [source]")
    return result.status == "pass"


def _load_fixtures(run: _Run, extra: Sequence[Path]) -> None:
    result = run.check("fixtures")
    paths = sorted((run.directory / "fixtures").glob("*.json")) + list(extra)
    for path in paths:
        loaded = _read_fixture(run, result, path)
        if loaded is not None:
            run.fixtures.append(loaded)
    if not paths:
        result.skip("the plugin ships no fixtures (fixtures/*.json) and none was given")


def load_fixture(run: _Run, path: Path) -> tuple[str, dict[str, Any]] | None:
    """One fixture file, checked against the manifest (`fixtures`); None when it is not valid."""
    result = run.check("fixtures")
    with timed(result):
        return _read_fixture(run, result, path)


def development_run(path: Path, *, startup_timeout: float, port: int | None = None) -> _Run:
    """A run for `mnemon plugin dev`: the manifest inspected, the plugin's output on stderr."""
    path = Path(path).absolute()  # once: every launch agrees on where the plugin is
    report = inspect_manifest(path)
    return _Run(
        directory=path if path.is_dir() else path.parent,
        report=report,
        startup_timeout=startup_timeout,
        output=2,  # the plugin's stdout and stderr go to the developer's stderr
        port=port,
        # as a host gives them: each declared secret from the variable of its name, when set
        secrets={name: os.environ[name] for name in report.secret_names if os.environ.get(name)},
    )


def _read_fixture(run: _Run, result: CheckResult, path: Path) -> tuple[str, dict[str, Any]] | None:
    validator = Draft202012Validator(load_schema("fixture.schema.json"))
    source = run.report.source
    assert source is not None
    routes = {r.id: r for r in source.routes}
    actions = {a.id: a for a in source.actions}
    schema = run.report.configuration_schema
    label = path.name
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result.issue("invalid_fixture", label, "the fixture is not readable JSON")
        return None
    problems = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)
    ]
    if not problems:
        calls = [("writes", w["action"], w["input"]) for w in value.get("writes", [])]
        calls += [("reads", r["route"], r["input"]) for r in value.get("reads", [])]
        isolation = value.get("isolation")
        if isolation:
            calls.append(("isolation/write", isolation["write"]["action"], {}))
            calls.append(("isolation/read", isolation["read"]["route"], isolation["read"]["input"]))
        for where, target, given in calls:
            declared = (actions if "write" in where else routes).get(target)
            if declared is None:
                problems.append(f"{where}: {target!r} is not declared by the manifest")
            elif where != "isolation/write" and not Draft202012Validator(
                dict(declared.input_schema)
            ).is_valid(given):
                problems.append(f"{where}: the input of {target!r} breaks its input schema")
        if schema is not None and not Draft202012Validator(schema).is_valid(
            value.get("configuration", {})
        ):
            problems.append("configuration: breaks the plugin's configuration schema")
    for problem in problems:
        result.issue("invalid_fixture", label, problem)
    return None if problems else (label, value)


async def _open_host(
    run: _Run, stack: AsyncExitStack, configuration: Mapping[str, Any]
) -> MemoryHost:
    """A host with the contract Strategy and the plugin (its process for `configuration`).

    Raises:
        PluginUnavailable: the plugin process for `configuration` did not start.
    """
    target = await run.target(configuration)
    if target is None:
        raise PluginUnavailable("the plugin did not start with this fixture's configuration")
    host = MemoryHost(
        source_timeout=max(2 * run.report.timeout_seconds, 1.0), strategy_type_id="contract"
    )
    await stack.enter_async_context(host)
    await host.mount(_ContractPlugin(run.transport), instance_id="contract-strategy")
    config = {"manifest": str(run.report.path), "endpoint": target.base_url}
    await host.mount(_ContractPlugin(run.transport, target), instance_id="contract", config=config)
    return host


def _code_of(error: MnemonError) -> str:
    code = getattr(error, "code", "")
    if isinstance(error, PluginUnavailable):
        return "plugin_unavailable"
    if code in _TIMEOUT_CODES:
        return "deadline_exceeded"
    if code in ("contract", "invalid_response", "invalid_output"):
        return "invalid_output"
    return "call_failed"


def _view_issues(result: CheckResult, label: str, view: Any) -> bool:
    ok = True
    for diagnostic in view.diagnostics:
        if diagnostic.key != CONTRACT_KEY:
            continue
        ok = False
        timed_out = diagnostic.code.endswith("-timeout") or "plugin-timeout" in diagnostic.message
        code = "deadline_exceeded" if timed_out else "invalid_output"
        result.issue(code, label, f"the View's diagnostic {diagnostic.code}: {diagnostic.message}")
    if ok and CONTRACT_KEY not in {c.source_key for c in view.consistency}:
        result.issue("unavailable", label, "the Source is not in the View")
        ok = False
    return ok


async def invoke_fixture(
    run: _Run,
    result: CheckResult,
    label: str,
    fixture: Mapping[str, Any],
    answers: list[dict[str, Any]] | None = None,
) -> None:
    """Drive one fixture through real turns: its writes, then its reads, judged into `result`.

    `answers`, when given, receives what the plugin answered: each write's receipt and each
    read's evidence, as JSON.
    """
    answers = [] if answers is None else answers
    async with AsyncExitStack() as stack:
        host = await _open_host(run, stack, fixture.get("configuration", {}))
        async with host.turn(scope=fixture["scope"]) as turn:
            if not _view_issues(result, label, turn.view):
                return
            for index, write in enumerate(fixture.get("writes", [])):
                try:
                    receipt = await turn.execute_action(
                        f"{CONTRACT_KEY}/{write['action']}",
                        write["input"],
                        lambda offer: True,
                        idempotency_key=f"contract-{fixture['name']}-{index}",
                    )
                    answers.append(
                        {"write": write["action"], "receipt": receipt.model_dump(mode="json")}
                    )
                except ActionError as error:
                    result.issue(_code_of(error), f"{label}/writes/{index}", str(error))
        async with host.turn(scope=fixture["scope"]) as turn:
            if not _view_issues(result, label, turn.view):
                return
            for index, read in enumerate(fixture.get("reads", [])):
                try:
                    evidence = await turn.execute_route(
                        f"{CONTRACT_KEY}/{read['route']}", read["input"]
                    )
                except RouteError as error:
                    result.issue(_code_of(error), f"{label}/reads/{index}", str(error))
                    continue
                answers.append(
                    {"read": read["route"], "evidence": evidence.model_dump(mode="json")}
                )
                shown = " ".join(item.text for item in evidence.items)
                if not all(wanted in shown for wanted in read.get("expect_contains", [])):
                    result.issue(
                        "unexpected_output",
                        f"{label}/reads/{index}",
                        "the evidence does not contain what the fixture expects",
                    )


async def _check_invoke(run: _Run) -> None:
    result = run.check("invoke")
    default = {"name": "default", "scope": {"user_id": "contract"}}
    fixtures = run.fixtures or [("(default)", default)]
    result.fixture = ", ".join(label for label, _ in fixtures)
    with timed(result):
        for label, fixture in fixtures:
            try:
                await invoke_fixture(run, result, label, fixture)
            except MnemonError as error:
                # the core refused the plugin's answer while composing (the message names the
                # rule), or the plugin did not start: a failed check, never a crash
                result.issue(_code_of(error), label, str(error))
    limit = int(run.report.timeout_seconds * 1000)
    for exchange in run.transport.exchanges:
        if exchange.duration_ms > limit:
            result.issue(
                "deadline_exceeded", exchange.path, f"answered in {exchange.duration_ms} ms"
            )


async def _post(
    run: _Run,
    client: httpx.AsyncClient,
    target: _Target,
    path: str,
    content: bytes,
    headers: Mapping[str, str] | None = None,
) -> Exchange:
    """POST `content` to the plugin as the host would (or with other `headers`, for a probe)."""
    started = time.monotonic()
    try:
        status, answer = await _request(
            run,
            client,
            "POST",
            target.base_url + path,
            target.headers if headers is None else headers,
            content,
        )
        exchange = Exchange(path, content, status, answer, 0, target.base_url)
    except (httpx.HTTPError, TimeoutError, AnswerTooLarge):
        exchange = Exchange(path, content, 0, b"", 0, target.base_url)
    exchange.duration_ms = int((time.monotonic() - started) * 1000)
    run.probes.append(exchange)
    return exchange


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


async def _check_replay(run: _Run, client: httpx.AsyncClient) -> None:
    result = run.check("replay")
    recorded = [
        e
        for e in run.transport.exchanges
        if e.status == 200 and e.path.startswith("/v0/contributions/") and run.by_base(e.base)
    ]
    if not recorded:
        result.skip("no successful call was recorded to replay")
        return
    with timed(result):
        for name in ("facts", "query"):
            path = CALLS[name].path
            for original in [e for e in recorded if e.path == path][-2:]:
                target = run.by_base(original.base)
                assert target is not None
                first = await _post(run, client, target, path, original.request)
                second = await _post(run, client, target, path, original.request)
                if first.status != 200 or _json(first.answer) != _json(second.answer):
                    result.issue(
                        "nondeterministic_output",
                        path,
                        f"the same {name} request got different answers",
                    )
        path = CALLS["mutate"].path
        for original in [e for e in recorded if e.path == path]:
            if _json(original.request)["request"].get("idempotency_key") is None:
                continue
            target = run.by_base(original.base)
            assert target is not None
            again = await _post(run, client, target, path, original.request)
            if _json(again.answer) != _json(original.answer):
                result.issue(
                    "nondeterministic_output",
                    path,
                    "the same idempotency key got a different receipt",
                )


def _minimal_facts() -> dict[str, Any]:
    return {
        "invocation_id": "contract-invalid",
        "instance_key": CONTRACT_KEY,
        "provenance": {"entry_id": "contract", "package_name": "contract", "type_id": "contract"},
        "request": {
            "instance_key": CONTRACT_KEY,
            "scope": {"user_id": "contract"},
            "scenario": "agent.turn",
        },
    }


@dataclass(frozen=True)
class _Probe:
    """One request the plugin must refuse: what it is, where it goes, how it is sent."""

    name: str
    path: str
    content: bytes
    headers: Mapping[str, str] | None = None  # None: as the host sends (caller secret, JSON)
    status: int | None = None  # the status the protocol names for it, when it names one


def _undeclared_probes(run: _Run) -> list[_Probe]:
    """A recorded read and write, each retargeted at a route or action the manifest lacks."""
    probes = []
    for name, kind, key in (("query", "route", "route"), ("mutate", "action", "offer")):
        recorded = [e for e in run.transport.exchanges if e.path == CALLS[name].path]
        if recorded:
            body = _json(recorded[0].request)
            target = body["request"][key]
            field_name = "route_id" if kind == "route" else "action_id"
            target[field_name] = f"contract-undeclared-{kind}"
            target["id"] = f"{CONTRACT_KEY}/contract-undeclared-{kind}"
            probes.append(_Probe(f"undeclared_{kind}", CALLS[name].path, json.dumps(body).encode()))
    return probes


def _invalid_input_probes(run: _Run) -> list[_Probe]:
    """A recorded read and write whose input breaks the manifest's own schema.

    The plugin must check inputs itself: the host is not the only one that can reach it.
    """
    source = run.report.source
    assert source is not None
    schemas = {("query", route.id): route.input_schema for route in source.routes} | {
        ("mutate", action.id): action.input_schema for action in source.actions
    }
    probes = []
    for name, key, field_name in (("query", "route", "route_id"), ("mutate", "offer", "action_id")):
        for exchange in (e for e in run.transport.exchanges if e.path == CALLS[name].path):
            body = _json(exchange.request)
            target_id = body["request"][key][field_name]
            validator = Draft202012Validator(dict(schemas[(name, target_id)]))
            broken = {**body["request"]["input"], "contract_undeclared_property": 1}
            if validator.is_valid(broken):
                continue  # the schema admits extra properties: try another call
            body["request"]["input"] = broken
            if name == "mutate":
                body["request"]["idempotency_key"] = f"contract-invalid-{_secrets.token_hex(4)}"
            probes.append(
                _Probe(f"invalid_input_{name}", CALLS[name].path, json.dumps(body).encode())
            )
            break
    return probes


def _protection_probes() -> list[_Probe]:
    """Requests a stranger (another local process, a web page) could send: each is refused."""
    facts = CALLS["facts"].path
    body = json.dumps(_minimal_facts()).encode()
    json_type = {"Content-Type": "application/json"}
    return [
        _Probe("no_caller_secret", facts, body, json_type, 401),
        _Probe(
            "wrong_caller_secret",
            facts,
            body,
            {**json_type, "Authorization": "Bearer contract-wrong-secret-0000"},
            401,
        ),
        # the caller secret is right: only the Host (a DNS rebinding page) is foreign
        _Probe("foreign_host", facts, body, {"Host": "contract-rebinding.example"}),
        _Probe("text_plain_body", facts, body, {"Content-Type": "text/plain"}),
    ]


async def _check_invalid_request(run: _Run, client: httpx.AsyncClient, target: _Target) -> None:
    result = run.check("invalid_request")
    facts = CALLS["facts"].path
    probes = [
        _Probe("non_json", facts, b"{not json"),
        _Probe("unknown_field", facts, json.dumps({**_minimal_facts(), "unexpected": 1}).encode()),
        *_undeclared_probes(run),
        *_invalid_input_probes(run),
        *_protection_probes(),
    ]
    validator = Draft202012Validator(load_schema("error.schema.json"))
    result.note = "probes: " + ", ".join(probe.name for probe in probes)
    with timed(result):
        for probe in probes:
            headers = None
            if probe.headers is not None:
                headers = {**target.headers, **probe.headers}
                if probe.status == 401:
                    headers = {k: v for k, v in headers.items() if k != "Authorization"}
                    headers.update(probe.headers)
            exchange = await _post(run, client, target, probe.path, probe.content, headers)
            where = f"{probe.path}#{probe.name}"
            if exchange.status == 0:
                result.issue("plugin_unavailable", where, "the plugin did not answer")
            elif 200 <= exchange.status < 300:
                result.issue(
                    "accepted_invalid_request",
                    where,
                    f"answered {exchange.status} to a request it must refuse",
                )
            elif probe.status is not None and exchange.status != probe.status:
                result.issue(
                    "wrong_status", where, f"answered {exchange.status}, not {probe.status}"
                )
            else:
                envelope = parse_envelope(exchange.answer, validator)
                if envelope is None:
                    result.issue(
                        "invalid_envelope", where, "the refusal is not a valid error envelope"
                    )
                elif envelope.retryable or error_class_contradicts(envelope):
                    result.issue(
                        "wrong_error_class",
                        where,
                        "an invalid request must be refused with retryable: false",
                    )


def _check_credentials(run: _Run, output: bytes) -> None:
    result = run.check("credentials")
    tokens = [t.token for t in run.targets.values() if t is not None and t.launched is not None]
    if not run.report.secret_names and not tokens:
        result.skip("the manifest declares no secrets")
        return
    if run.mode != "launch":
        result.skip("secrets reach a plugin only when the runner launches it")
        return
    with timed(result):
        # the caller secret is a secret too: a plugin that repeats it hands it to anyone
        values = [v.encode() for v in [*run.secrets.values(), *tokens] if len(v) >= 8]
        for exchange in [*run.transport.exchanges, *run.probes]:
            if any(v in exchange.answer for v in values):
                result.issue("credential_leak", exchange.path, "an answer contains a secret value")
        if any(v in output for v in values):
            result.issue(
                "credential_leak", "(plugin output)", "the plugin's output contains a secret value"
            )


async def _isolation_probe(run: _Run, fixture: Mapping[str, Any]) -> tuple[bool, bool]:
    """Write a marker in the fixture's scope; whether it shows there, and in the other scope."""
    isolation = fixture["isolation"]
    marker = f"contract-marker-{_secrets.token_hex(6)}"
    written = json.loads(json.dumps(isolation["write"]["input"]).replace(_MARKER, marker))
    read = isolation["read"]
    seen = []
    async with AsyncExitStack() as stack:
        host = await _open_host(run, stack, fixture.get("configuration", {}))
        async with host.turn(scope=fixture["scope"]) as turn:
            await turn.execute_action(
                f"{CONTRACT_KEY}/{isolation['write']['action']}", written, lambda offer: True
            )
        for scope in (fixture["scope"], isolation["other_scope"]):
            async with host.turn(scope=scope) as turn:
                shown = " ".join(f.text for f in turn.view.fragments)
                try:
                    evidence = await turn.execute_route(
                        f"{CONTRACT_KEY}/{read['route']}", read["input"]
                    )
                    shown += " ".join(item.text for item in evidence.items)
                except RouteError:
                    pass  # a scope the Source does not serve shows nothing: that is fine
                seen.append(marker in shown)
    return seen[0], seen[1]


async def _check_isolation(run: _Run) -> None:
    result = run.check("isolation")
    probes = [(label, f) for label, f in run.fixtures if "isolation" in f]
    if not probes:
        result.skip("no fixture declares an isolation probe")
        return
    with timed(result):
        for label, fixture in probes:
            try:
                found, leaked = await _isolation_probe(run, fixture)
            except MnemonError as error:
                # a slow or broken plugin fails this check; the report is still written
                result.issue(_code_of(error), label, f"the isolation probe could not run: {error}")
                continue
            if not found:
                result.issue(
                    "marker_not_found",
                    label,
                    "the marker written in the scope is not read back there",
                )
            if leaked:
                result.issue("scope_leak", label, "data written in one scope shows in the other")


async def certify(
    directory: Path,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    fixtures: Sequence[Path] = (),
    startup_timeout: float = 10.0,
    plugin_output: IO[bytes] | None = None,
) -> dict[str, Any]:
    """Run every check against the plugin in `directory` and return the contract report.

    Args:
        directory: the plugin's folder, holding `mnemon-source.yaml` (and `fixtures/*.json`),
            or the manifest itself; a relative path is taken from the working directory.
        endpoint: a running plugin's base URL; None launches `run.command` (once per
            configuration the fixtures use).
        token: the caller secret of the plugin at `endpoint` (by default the value of
            `MNEMON_PLUGIN_TOKEN`); a launched plugin gets a fresh one.
        fixtures: more fixture files to drive.
        startup_timeout: how long a launched plugin may take to answer HTTP.
        plugin_output: where a launched plugin's stdout and stderr are copied afterwards.

    Raises:
        DefinitionError: an endpoint without a caller secret.
    """
    # once: the manifest, its fixtures and every launch agree on where the plugin is
    directory = Path(directory).absolute()  # noqa: ASYNC240 (no I/O to wait for)
    report = inspect_manifest(directory)
    run = _Run(
        directory=directory if directory.is_dir() else directory.parent,
        report=report,
        startup_timeout=startup_timeout,
        mode="endpoint" if endpoint else "launch",
        endpoint=endpoint,
    )
    if endpoint is not None:
        run.token = token if token is not None else os.environ.get(MNEMON_RUN.token_variable)
        if not run.token:
            raise DefinitionError(
                f"an endpoint needs the plugin's caller secret: set {MNEMON_RUN.token_variable}"
            )
    with timed(run.check("manifest")):
        ready = check_manifest(run)
    if ready:
        with timed(run.check("compatibility")):
            ready = check_compatibility(run)
    if ready and endpoint is None and not (report.manifest or {}).get("run"):
        run.check("health").issue(
            "no_run_command", "/run/command", "nothing to launch: give --endpoint or run.command"
        )
        ready = False
    if ready:
        output = await _run_target(run, fixtures)
        if plugin_output is not None:
            plugin_output.write(output)
            plugin_output.flush()
        if run.base_url:
            _check_credentials(run, output)
    for check_id in CHECKS:
        if check_id not in run.results:
            run.check(check_id).skip(_why_skipped(run))
    return _report(run, [run.results[c] for c in CHECKS])


async def _run_target(run: _Run, fixtures: Sequence[Path]) -> bytes:
    """Launch (or target) the plugin, run the checks that talk to it, return its output."""
    with tempfile.TemporaryFile() as captured:
        run.output = captured
        run.secrets = {
            name: f"contract-secret-{_secrets.token_hex(12)}" for name in run.report.secret_names
        }
        try:
            with timed(run.check("fixtures")):
                _load_fixtures(run, fixtures)
            # the first fixture's configuration serves the checks of the plugin as a whole
            configuration = run.fixtures[0][1].get("configuration", {}) if run.fixtures else {}
            target = await run.target(configuration)
            if target is None:
                run.check("health").issue(
                    "plugin_unavailable", HEALTH, "the plugin did not start answering HTTP"
                )
            else:
                await _run_checks(run, target)
        finally:
            await run.stop()
            await run.transport.aclose()
        captured.seek(0)
        return captured.read()


def _why_skipped(run: _Run) -> str:
    for check_id in ("manifest", "compatibility", "health", "discovery"):
        result = run.results.get(check_id)
        if result is not None and result.status == "fail":
            return f"skipped: the {check_id} check failed"
    return "not applicable"


async def _run_checks(run: _Run, target: _Target) -> None:
    async with httpx.AsyncClient(timeout=None) as client:
        await check_health(run, client, target)
        if any(i["code"] == "plugin_unavailable" for i in run.check("health").issues):
            return
        if await check_discovery(run, client, target):
            # a host refuses a plugin whose discovery disagrees: nothing more would reach it
            await _check_invoke(run)
            await _check_replay(run, client)
            await _check_isolation(run)
        # after invoke: the probes for undeclared targets and inputs reuse its recorded calls
        await _check_invalid_request(run, client, target)


def _report(run: _Run, checks: list[CheckResult]) -> dict[str, Any]:
    report = run.report
    plugin: dict[str, Any] = {"manifest_path": str(report.path)}
    if report.plugin_id:
        plugin.update(id=report.plugin_id, version=report.version)
    if report.digest:
        plugin["manifest_digest"] = report.digest
    target: dict[str, Any] = {"mode": run.mode}
    if run.base_url:
        target["base_url"] = run.base_url
    compatibility = {
        ("engine" if key == "mnemon" else key): {"range": r, "version": v, "compatible": ok}
        for key, (r, v, ok) in report.compatibility.items()
    }
    summary = summarize(checks)
    value = {
        "report_version": "1",
        "certified": summary["failed"] == 0,
        "plugin": plugin,
        "target": target,
        "engine_version": engine_version(),
        "plugin_api_version": report.plugin_api or PLUGIN_API_VERSIONS[-1],
        "compatibility": compatibility,
        "checks": [c.as_json() for c in checks],
        "summary": summary,
    }
    report_validator().validate(value)
    return value
