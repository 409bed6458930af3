"""The contract runner's Quivr-compat mode: a Quivr plugin certified over the wire.

`mnemon plugin test` runs this on a Quivr manifest (`quivr-plugin.yaml`, or any file with a
Quivr manifest's content): the checks of Quivr's own contract runner for each Contribution
the plugin declares that mnemon hosts (`ingestion`, `retrieval`), each judged by this
package's inspector and the rules the host judges answers by, reported in Quivr's contract
report v1 shape. The Contributions mnemon does not host are named, with the reason, in the
`manifest` check's note; a plugin with none mnemon hosts fails `compatibility`
(`not_hosted`). A check whose premise failed is skipped with the reason; the plugin is
certified when no check failed. The report, the recorded exchanges and the launcher are
mnemon-remote's, shared with its own runner. A launched plugin is certified as the host
reaches it: every request to a Contribution signed with its per-launch key.
"""

from __future__ import annotations

import json
import secrets as _secrets
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
from jsonschema import Draft202012Validator
from mnemon_remote import (
    CheckResult,
    ContractChecks,
    LaunchedPlugin,
    PluginUnavailable,
    RecordingTransport,
    report_validator,
    summarize,
    timed,
)

from mnemon.sdk import describe_schema_error
from mnemon.versions import parse_range

from ._certify import FixtureOutcome, fixture_request, fixture_session, invoke_fixture
from ._contract_ingestion import (
    INGESTION,
    INGESTION_CHECKS,
    IngestionFixture,
    certify_ingestion,
)
from ._hosting import HostingPlan, plan_hosting
from ._manifest import (
    ENGINE_VERSION,
    PLUGIN_API_VERSIONS,
    QUIVR_PLUGIN_API_VERSIONS,
    ManifestReport,
    admitted_versions,
    inspect_manifest,
)
from ._plugin import HEALTH, SEARCH, QuivrPlugin, launch_plugin
from ._rules import RetrievalLimits, check_search_request
from ._schemas import (
    discovery_validator,
    fixture_validator,
    health_validator,
    request_validator,
)
from ._signing import EngineRequestAuth
from ._verdicts import first_difference, judge_refusal

__all__ = [
    "INGESTION_CHECKS",
    "MANIFEST_NAME",
    "QUIVR_CHECKS",
    "ContractRun",
    "ContractRunner",
    "RetrievalSearch",
    "certify_plugin",
    "check_discovery",
    "check_fixtures",
    "check_health",
    "check_manifest",
    "check_search",
    "inspect_plugin",
    "manifest_path",
    "now",
    "read_manifest",
]

MANIFEST_NAME = "quivr-plugin.yaml"
DISCOVERY = "/v0/discovery"
# Quivr labels its own normative fixtures this way in a report
NORMATIVE = "contracts:"
RETRIEVAL = "retrieval"
#: the checks of Quivr's runner for a retrieval plugin, in report order, with their titles
QUIVR_CHECKS = ContractChecks(
    RETRIEVAL,
    {
        "manifest": "quivr-plugin.yaml is valid (mnemon plugin inspect)",
        "compatibility": "the manifest's ranges admit this engine and Plugin API",
        "health": "GET /v0/health answers 200",
        "discovery": "GET /v0/discovery matches quivr-plugin.yaml",
        "fixtures": "retrieval fixtures build valid searches",
        "invoke": "every profile ranks served candidates within its limits",
        "replay": "the same search twice returns the same ranking",
        "invalid_request": "invalid searches are refused with a terminal error envelope",
        "credentials": "no secret value appears in any answer or in the plugin's output",
    },
)


@dataclass
class RetrievalSearch:
    """One fixture that builds valid searches: its label, value and the profiles to run."""

    label: str
    fixture: dict[str, Any]
    profiles: list[str]


#: the runner's checks of each Contribution it certifies
CHECKS = {RETRIEVAL: QUIVR_CHECKS, INGESTION: INGESTION_CHECKS}


@dataclass
class ContractRun:
    manifest_path: Path
    report: ManifestReport
    mode: str
    startup_timeout: float
    base_url: str = ""
    discovered_api: str | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    # a launched plugin's per-launch key: every request to a Contribution is signed with it
    key: bytes | None = None
    checks: list[CheckResult] = field(default_factory=list)
    transport: RecordingTransport = field(default_factory=RecordingTransport)

    def add(
        self,
        check_id: str,
        title: str | None = None,
        fixture: str | None = None,
        contribution: str = RETRIEVAL,
    ) -> CheckResult:
        check = CHECKS[contribution].result(check_id, title, fixture)
        self.checks.append(check)
        return check

    @property
    def manifest(self) -> Mapping[str, Any]:
        return self.report.manifest or {}

    @property
    def plan(self) -> HostingPlan:
        """What mnemon hosts of the plugin (nothing while the manifest is invalid)."""
        return plan_hosting(self.report)

    @property
    def hosted(self) -> list[str]:
        """The Contributions certified, in report order.

        Retrieval when none is hosted: the report then lists its checks, skipped.
        """
        return list(self.plan.hosted) or [RETRIEVAL]

    @property
    def contribution(self) -> Mapping[str, Any]:
        return dict(self.manifest["contributions"][RETRIEVAL])

    @property
    def profiles(self) -> dict[str, Any]:
        return dict(self.contribution["profiles"])

    def failed(self, check_id: str) -> bool:
        return any(c.id == check_id and c.status == "fail" for c in self.checks)


def manifest_path(path: Path) -> Path:
    """The `quivr-plugin.yaml` a path names: the file itself, or the one in the folder."""
    return path / MANIFEST_NAME if path.is_dir() else path


def read_manifest(path: Path) -> ManifestReport | None:
    try:
        return inspect_manifest(path)
    except OSError:
        return None


def _spoken(report: ManifestReport) -> str:
    """The Plugin API version mnemon speaks with the plugin, or its highest when none."""
    return plan_hosting(report).plugin_api or str(max(PLUGIN_API_VERSIONS))


def _negotiated(report: ManifestReport) -> str:
    """The Plugin API version Quivr's rule picks: the highest admitted, else its newest."""
    admitted = admitted_versions(report.manifest or {})
    return str(admitted[-1] if admitted else max(QUIVR_PLUGIN_API_VERSIONS))


def _speaks(report: ManifestReport) -> bool:
    """Whether the manifest's range admits a Plugin API version mnemon speaks."""
    return bool(admitted_versions(report.manifest or {}, PLUGIN_API_VERSIONS))


def _compatibility(
    report: ManifestReport, plugin_api: str | None = None
) -> dict[str, dict[str, Any]]:
    """The `compatibility` of a report: each declared range, the version judged and the verdict.

    `plugin_api` is the Plugin API version judged: Quivr's negotiated one for an inspection;
    by default the one mnemon speaks with the plugin (a certification), which must exist.
    """
    ranges = (report.manifest or {}).get("compatibility")
    if not isinstance(ranges, Mapping):
        return {}
    value: dict[str, dict[str, Any]] = {}
    codes = report.codes
    certifying = plugin_api is None
    judged = _spoken(report) if certifying else plugin_api
    for key, version in (("engine", ENGINE_VERSION), ("plugin_api", judged)):
        text = ranges.get(key)
        if not isinstance(text, str):
            continue
        compatible = f"incompatible_{key}" not in codes and not any(
            i.path == f"/compatibility/{key}" for i in report.issues
        )
        if certifying and key == "plugin_api":
            compatible = compatible and _speaks(report)
        value[key] = {
            "range": text,
            "version": version,
            "compatible": compatible,
        }
    return value


def _manifest_issues(report: ManifestReport) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The manifest check's issues and the compatibility check's, in that order."""
    manifest: list[dict[str, str]] = []
    compatibility: list[dict[str, str]] = []
    for issue in report.issues:
        value = {"code": issue.code, "path": issue.path, "message": issue.message}
        (compatibility if issue.code.startswith("incompatible_") else manifest).append(value)
    return manifest, compatibility


def _hosting_issues(report: ManifestReport) -> list[dict[str, str]]:
    """Why mnemon cannot certify a valid plugin: it hosts none of its Contributions."""
    plan = plan_hosting(report)
    if not report.valid or plan.hosted:
        return []
    if not _speaks(report):
        return [
            {
                "code": "incompatible_plugin_api",
                "path": "/compatibility/plugin_api",
                "message": "the range admits no Plugin API version mnemon speaks "
                f"({PLUGIN_API_VERSIONS[0]} to {PLUGIN_API_VERSIONS[-1]})",
            }
        ]
    return [
        {"code": "not_hosted", "path": f"/contributions/{c.name}", "message": c.reason}
        for c in plan.contributions
    ]


def inspect_plugin(path: Path) -> dict[str, Any]:
    """Inspect a Quivr plugin's manifest (its folder's `quivr-plugin.yaml`, or a file).

    Returns what `mnemon plugin inspect --json` prints: `valid` (by Quivr's contract),
    `manifest_path`, `manifest_digest`, `id`, `version`, `plugin_api_version` (negotiated as
    Quivr does), `compatibility` (`engine` and `plugin_api`: `range`, `version`, `compatible`),
    `issues` (`code`, `path`, `message`), `contributions` (each declared one: `name`, `hosted`,
    `reason`), `hosted` (whether mnemon hosts any) and `hosted_plugin_api_version` (the
    version mnemon speaks with it, or null). A Contribution mnemon does not host is listed as
    such, never an issue. Messages never quote a value from the file.
    """
    path = manifest_path(path)
    report = read_manifest(path)
    if report is None:
        return {
            "valid": False,
            "manifest_path": str(path),
            "manifest_digest": None,
            "id": None,
            "version": None,
            "plugin_api_version": None,
            "compatibility": {},
            "issues": [{"code": "unreadable", "path": "", "message": "cannot read the manifest"}],
            "contributions": [],
            "hosted": False,
            "hosted_plugin_api_version": None,
        }
    manifest, compatibility = _manifest_issues(report)
    issues = manifest + compatibility
    value = report.manifest or {}
    plan = plan_hosting(report)
    return {
        "valid": not issues,
        "manifest_path": str(path),
        "manifest_digest": report.digest,
        "id": value.get("id") if isinstance(value.get("id"), str) else None,
        "version": value.get("version") if isinstance(value.get("version"), str) else None,
        "plugin_api_version": report.plugin_api,
        "compatibility": _compatibility(report, _negotiated(report)),
        "issues": issues,
        "contributions": [c.as_json() for c in plan.contributions],
        "hosted": bool(plan.hosted),
        "hosted_plugin_api_version": plan.plugin_api,
    }


def _add_issues(check: CheckResult, issues: Sequence[Mapping[str, str]]) -> None:
    for issue in issues:
        check.issue(issue["code"], issue["path"], issue["message"])


def check_manifest(run: ContractRun) -> bool:
    manifest, compatibility = _manifest_issues(run.report)
    check = run.add("manifest")
    _add_issues(check, manifest)
    unhosted = run.plan.not_hosted
    if run.plan.hosted and unhosted:
        # valid Quivr, and only what mnemon hosts is certified: the rest is named, not failed
        check.note = "not hosted, not certified: " + "; ".join(c.line() for c in unhosted)
    title = f"engine {ENGINE_VERSION} and Plugin API {_spoken(run.report)} satisfy the ranges"
    compat = run.add("compatibility", title)
    _add_issues(compat, compatibility or _hosting_issues(run.report))
    if not compatibility and any(i["path"].startswith("/compatibility") for i in manifest):
        compat.skip("a compatibility range is missing or invalid; see the manifest check")
    return not check.issues and not compat.issues and run.report.manifest is not None


async def _healthy(client: httpx.AsyncClient) -> bool:
    try:
        response = await client.get(HEALTH)
    except httpx.HTTPError:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return response.status_code == 200 and health_validator().is_valid(body)


async def check_health(run: ContractRun, client: httpx.AsyncClient, launched: bool) -> bool:
    check = run.add("health")
    with timed(check):
        healthy = False
        with anyio.move_on_after(run.startup_timeout):
            # polling is the protocol: nothing tells the runner when a plugin is ready
            while not (healthy := await _healthy(client)):  # noqa: ASYNC110
                await anyio.sleep(0.05)
    if launched:
        check.note = "launched " + " ".join(str(p) for p in run.manifest["run"]["command"])
    if not healthy:
        check.issue(
            "unhealthy",
            HEALTH,
            f'GET /v0/health did not answer 200 {{"status": "ok"}} '
            f"within {run.startup_timeout:g} s",
        )
    return healthy


def _admitted(run: ContractRun, version: str) -> bool:
    declared = parse_range(str(run.manifest["compatibility"]["plugin_api"]))
    return any(str(v) == version and declared.admits(v) for v in PLUGIN_API_VERSIONS)


async def check_discovery(run: ContractRun, client: httpx.AsyncClient) -> None:
    check = run.add("discovery")
    with timed(check):
        try:
            with anyio.fail_after(run.startup_timeout):
                response = await client.get(DISCOVERY)
                value = json.loads(await response.aread())
        except (httpx.HTTPError, TimeoutError):
            check.issue("plugin_unavailable", DISCOVERY, "GET /v0/discovery did not answer")
            return
        except ValueError:
            value = None
        if response.status_code != 200 or not discovery_validator().is_valid(value):
            check.issue(
                "schema_violation", DISCOVERY, "the answer is not a valid discovery document"
            )
            return
        run.discovered_api = str(value["plugin_api"])
        expected = {
            "/plugin/id": (value["plugin"]["id"], run.manifest["id"]),
            "/plugin/version": (value["plugin"]["version"], run.manifest["version"]),
            "/manifest_digest": (value["manifest_digest"], run.report.digest),
            "/contributions": (
                sorted(value["contributions"]),
                sorted(run.manifest["contributions"]),
            ),
        }
        for path, (served, declared) in expected.items():
            if served != declared:
                check.issue("discovery_mismatch", path, f"{path} differs from quivr-plugin.yaml's")
        if not _admitted(run, run.discovered_api):
            check.issue(
                "discovery_mismatch",
                "/plugin_api",
                f"Plugin API {run.discovered_api} is not one the manifest admits and mnemon speaks",
            )


def _normative(name: str) -> Any:
    return json.loads(
        resources.files(__package__).joinpath("contracts", name).read_text(encoding="utf-8")
    )


def _fixture_problems(
    run: ContractRun, fixture: Any
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A fixture's shape problems, and the ones of its configuration: (path, message) each."""
    shape = [
        ("/" + "/".join(map(str, e.absolute_path)), describe_schema_error(e))
        for e in fixture_validator().iter_errors(fixture)
    ]
    if shape:
        return shape, []
    retrieval = fixture["retrieval"]
    segments = {c["segment_id"] for c in retrieval["candidates"]}
    for index, profile in enumerate(retrieval.get("profiles", [])):
        if profile not in run.profiles:
            shape.append((f"/retrieval/profiles/{index}", "a profile the manifest lacks"))
    for primitive, order in (retrieval.get("order") or {}).items():
        if not set(order) <= segments:
            shape.append((f"/retrieval/order/{primitive}", "a segment not in the candidates"))
    if not set((retrieval.get("expect") or {}).get("top", [])) <= segments:
        shape.append(("/retrieval/expect/top", "a segment not in the candidates"))
    configuration: list[tuple[str, str]] = []
    schema = (run.manifest.get("configuration") or {}).get("schema")
    if schema is not None:
        configuration = [
            ("/retrieval/configuration", f"the plugin's configuration schema: {e.validator}")
            for e in Draft202012Validator(schema).iter_errors(retrieval.get("configuration", {}))
        ]
    if not shape and not configuration:
        session = fixture_session(run.report, fixture, next(iter(run.profiles)))
        if check_search_request(fixture_request(session, fixture)):
            shape.append(("/retrieval", "the fixture builds a search request the schema rejects"))
    return shape, configuration


@dataclass
class _OwnFixtures:
    """The plugin's own fixture files, by the Contribution each drives."""

    retrieval: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ingestion: list[IngestionFixture] = field(default_factory=list)
    # (path, message) of a file no certified Contribution can use
    strays: list[tuple[str, str]] = field(default_factory=list)


def _own_fixtures(run: ContractRun, extra: Sequence[Path]) -> _OwnFixtures:
    """`fixtures/*.json` beside the manifest and `extra`, each by its top-level key."""
    folder = run.manifest_path.parent
    own = _OwnFixtures()
    for path in sorted((folder / "fixtures").glob("*.json")) + list(extra):
        try:
            label = path.resolve().relative_to(folder.resolve()).as_posix()
        except ValueError:
            label = path.name
        try:
            raw = path.read_bytes()
            fixture = json.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            own.strays.append(("", f"{label}: not a readable JSON file"))
            continue
        kinds = [c for c in run.hosted if isinstance(fixture, dict) and c in fixture]
        if RETRIEVAL in kinds:
            own.retrieval.append((label, fixture))
        elif INGESTION in kinds:
            own.ingestion.append(IngestionFixture(label, raw, fixture))
        else:
            own.strays.append(
                (
                    "/contributions",
                    f"{label}: a fixture of no Contribution the manifest declares and mnemon "
                    f"hosts ({', '.join(run.hosted)})",
                )
            )
    return own


def check_fixtures(
    run: ContractRun,
    own: Sequence[tuple[str, dict[str, Any]]],
    strays: Sequence[tuple[str, str]],
    *,
    normative: bool = True,
) -> list[RetrievalSearch]:
    """The `fixtures` check: the retrieval fixtures that build valid searches.

    Quivr's normative `newsroom.json` first (unless `normative` is false), then `own`;
    `strays` are (path, message) of files no Contribution can use.
    """
    check = run.add("fixtures")
    searches: list[RetrievalSearch] = []
    notes: list[str] = []
    with timed(check):
        for where, message in strays:
            check.issue("invalid_fixture", where, message)
        label = NORMATIVE + "retrieval/newsroom.json"
        fixture = _normative("retrieval/newsroom.json")
        shape, configuration = _fixture_problems(run, fixture) if normative else ([], [])
        if shape or configuration:
            where, message = (shape + configuration)[0]
            notes.append(f"{label} skipped: {message} at {where}")
        elif normative:
            searches.append(RetrievalSearch(label, fixture, _profiles(run, fixture)))
        for label, fixture in own:
            shape, configuration = _fixture_problems(run, fixture)
            for where, message in shape + configuration:
                check.issue("invalid_fixture", where, f"{label}: {message}")
            if not shape and not configuration:
                searches.append(RetrievalSearch(label, fixture, _profiles(run, fixture)))
        if not searches and not check.issues:
            check.issue(
                "no_fixture",
                "/fixtures",
                "no retrieval fixture applies: add fixtures/<name>.json with a query and "
                "candidates (Quivr's retrieval-fixture.schema.json)",
            )
    labels = ", ".join(s.label for s in searches) or "no fixture"
    check.note = "; ".join([f"using {labels}", *notes])
    return searches


def _profiles(run: ContractRun, fixture: Mapping[str, Any]) -> list[str]:
    return list(fixture["retrieval"].get("profiles") or run.profiles)


def _outcome_issues(outcome: FixtureOutcome) -> list[dict[str, str]]:
    return [{"code": i.code, "path": i.path, "message": i.message} for i in outcome.issues]


async def check_search(
    run: ContractRun, plugin: QuivrPlugin, search: RetrievalSearch
) -> list[FixtureOutcome]:
    """`invoke` per profile and `replay` of one fixture; the outcome of each profile."""
    first: FixtureOutcome | None = None
    outcomes = []
    limits = RetrievalLimits.from_manifest(run.contribution)
    for profile in search.profiles:
        declared = run.profiles[profile]
        title = (
            f"profile {profile} ranks served candidates within {declared['max_latency_ms']} ms "
            f"and {declared['max_cost_cents']:g} cents, in at most {limits.max_rounds} rounds "
            "the engine accepts"
        )
        check = run.add("invoke", title, search.label)
        with timed(check):
            outcome = await invoke_fixture(plugin, run.report, search.fixture, profile)
        outcomes.append(outcome)
        _add_issues(check, _outcome_issues(outcome))
        if outcome.passed:
            check.note = f"{len(outcome.hits)} hits in {outcome.rounds} rounds"
            first = first or outcome
    replay = run.add("replay", fixture=search.label)
    if first is None:
        replay.skip("no search succeeded")
        return outcomes
    with timed(replay):
        again = await invoke_fixture(
            plugin, run.report, search.fixture, first.profile, suffix="-replay"
        )
    _add_issues(replay, _outcome_issues(again))
    if again.passed:
        where = first_difference(first.hits, again.hits)
        if where is not None:
            replay.issue(
                "nondeterministic_output",
                "/ranking/hits" + (where if where != "/" else ""),
                f"two identical searches differ at /ranking/hits{where if where != '/' else ''}"
                "; the same search must rank the same way",
            )
    return outcomes


def _invalid_cases(run: ContractRun, search: RetrievalSearch) -> list[tuple[str, str, bytes]]:
    session = fixture_session(run.report, search.fixture, search.profiles[0])
    valid = fixture_request(session, search.fixture, "-invalid")
    cases = [
        ("search:non-json-body", "the body is not JSON", b'{"invocation_id": '),
        (
            "search:unknown-field",
            "the request carries an unknown top-level field",
            json.dumps({**valid, "unexpected_field": True}).encode(),
        ),
        (
            "search:undeclared-profile",
            "the request names a profile the manifest does not declare",
            json.dumps({**valid, "profile": "quivr_contract_undeclared"}).encode(),
        ),
    ]
    folder = resources.files(__package__).joinpath("contracts", "requests", "retrieval")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        raw = entry.read_bytes()
        if request_validator().is_valid(json.loads(raw)):
            continue  # only the contract's invalid requests
        label = f"{NORMATIVE}requests/retrieval/{entry.name}"
        reason = "the normative fixture violates retrieval-search-request.schema.json"
        cases.append((label, reason, raw))
    return cases


async def _check_invalid_requests(
    run: ContractRun, client: httpx.AsyncClient, search: RetrievalSearch | None
) -> None:
    if search is None:
        run.add("invalid_request").skip(
            "no fixture built a valid search to derive the invalid ones from"
        )
        return
    budget = run.profiles[search.profiles[0]]["max_latency_ms"] / 1000
    for label, reason, body in _invalid_cases(run, search):
        title = f"an invalid search is refused with a terminal error envelope ({reason})"
        check = run.add("invalid_request", title, label)
        with timed(check):
            try:
                with anyio.fail_after(budget):
                    response = await client.post(
                        SEARCH, content=body, headers={"Content-Type": "application/json"}
                    )
                    answer = await response.aread()
            except (httpx.HTTPError, TimeoutError):
                check.issue(
                    "plugin_unavailable",
                    SEARCH,
                    f"no answer within max_latency_ms ({reason})",
                )
                continue
        judge_refusal(check, SEARCH, response.status_code, answer, reason)


def _check_credentials(run: ContractRun, output: bytes, contribution: str) -> None:
    check = run.add("credentials", contribution=contribution)
    if not run.secrets and not (run.manifest.get("secrets") or []):
        check.skip("the manifest declares no secrets")
        return
    if run.mode != "launch":
        check.skip("secrets reach a plugin only when the runner launches it")
        return
    with timed(check):
        values = [value.encode() for value in run.secrets.values() if len(value) >= 8]
        route = f"/v0/contributions/{contribution}/"
        answers = [e.answer for e in run.transport.exchanges if e.path.startswith(route)]
        leaked = sum(any(v in answer for v in values) for answer in answers)
        if leaked:
            check.issue("credential_leak", route, f"{leaked} answer(s) contain a secret's value")
        if any(v in output for v in values):
            check.issue(
                "credential_leak", "", "the plugin's stdout or stderr contains a secret's value"
            )


async def _run_checks(
    run: ContractRun, launched: LaunchedPlugin | None, fixtures: Sequence[Path]
) -> None:
    plugin_id = str(run.manifest["id"])
    auth = None if run.key is None else EngineRequestAuth(run.key, plugin_id=plugin_id, clock=now)
    async with httpx.AsyncClient(
        base_url=run.base_url, transport=run.transport, timeout=None, auth=auth
    ) as client:
        if not await check_health(run, client, launched is not None):
            return
        await check_discovery(run, client)
        own = _own_fixtures(run, fixtures)
        # the plugin's error codes go into the report: the runner's secrets are scrubbed first
        plugin = QuivrPlugin(
            run.base_url,
            run.report,
            auth=auth,
            transport=run.transport,
            secrets=[*run.secrets.values(), *([] if run.key is None else [run.key.decode()])],
        )
        try:
            for contribution in run.hosted:
                # fixtures no Contribution can use are reported by the first one's check
                strays = own.strays if contribution == run.hosted[0] else []
                if contribution == INGESTION:
                    await certify_ingestion(
                        run.report, client, plugin, run.checks, own.ingestion, strays
                    )
                    continue
                searches = check_fixtures(run, own.retrieval, strays)
                for search in searches:
                    await check_search(run, plugin, search)
                await _check_invalid_requests(run, client, searches[0] if searches else None)
        finally:
            await plugin.aclose()


def now() -> int:
    return int(time.time())


async def _reach(
    run: ContractRun, fixtures: Sequence[Path], endpoint: str | None, captured: IO[bytes]
) -> None:
    if endpoint is not None:
        run.base_url = endpoint.rstrip("/")
        await _run_checks(run, None, fixtures)
        return
    command = (run.manifest.get("run") or {}).get("command")
    if not command:
        check = run.add("health")
        check.issue(
            "no_run_command",
            "/run/command",
            "the manifest declares no run.command; add one or give --endpoint",
        )
        return
    run.secrets = {
        str(s["name"]): f"quivr-contract-{_secrets.token_hex(12)}"
        for s in run.manifest.get("secrets") or []
    }
    try:
        launched = await launch_plugin(
            run.manifest_path,
            run.report,
            startup_timeout=run.startup_timeout,
            secrets=run.secrets,
            output=captured,
        )
    except PluginUnavailable:
        check = run.add("health")
        check.note = "launched " + " ".join(str(p) for p in command)
        check.issue(
            "unhealthy",
            HEALTH,
            f"the launched plugin did not answer GET /v0/health with 200 within "
            f"{run.startup_timeout:g} s",
        )
        return
    run.base_url = launched.endpoint
    run.key = None if launched.token is None else launched.token.encode("ascii")
    try:
        await _run_checks(run, launched, fixtures)
    finally:
        await launched.stop()


def _why_skipped(run: ContractRun) -> str:
    for check_id in ("manifest", "compatibility", "health"):
        if run.failed(check_id):
            return f"skipped: the {check_id} check failed"
    return "not applicable"


async def certify_plugin(
    directory: Path,
    *,
    endpoint: str | None = None,
    fixtures: Sequence[Path] = (),
    startup_timeout: float = 10.0,
    plugin_output: IO[bytes] | None = None,
) -> dict[str, Any]:
    """Certify the Quivr plugin in `directory` and return the contract report v1.

    Checks, in order: `manifest`, `compatibility`, `health` and `discovery` of the whole
    plugin; then, when it declares `ingestion`, the ingestion checks (`fixtures`, `invoke`,
    `replay`, `segments_only`, `embed_query`, `invalid_request`; see `certify_ingestion`);
    when it declares `retrieval`, `fixtures`, `invoke` (per fixture and profile), `replay`
    (per fixture) and `invalid_request` (per probe); and one `credentials` per Contribution.
    The fixtures are Quivr's normative `article.json` and `newsroom.json` and the plugin's own
    (`fixtures/*.json` beside the manifest, and `fixtures`), each driving the Contribution its
    top-level key names.

    Args:
        directory: the plugin's folder holding `quivr-plugin.yaml`, or that file.
        endpoint: a running plugin's base URL; None launches `run.command` on loopback.
        fixtures: more fixture files to drive.
        startup_timeout: seconds the plugin has to answer `GET /v0/health` with 200.
        plugin_output: where a launched plugin's stdout and stderr are copied afterwards.
    """
    path = manifest_path(directory)
    report = read_manifest(path)
    mode = "endpoint" if endpoint is not None else "launch"
    run = ContractRun(path, report or ManifestReport(None, "", (), None), mode, startup_timeout)
    output = b""
    if report is None:
        run.add("manifest").issue("unreadable", "", "cannot read quivr-plugin.yaml")
    elif check_manifest(run):
        with tempfile.TemporaryFile() as captured:
            try:
                await _reach(run, fixtures, endpoint, captured)
            finally:
                await run.transport.aclose()
            captured.seek(0)
            output = captured.read()
        if plugin_output is not None:
            plugin_output.write(output)
            plugin_output.flush()
    _skip_missing(run, credentials=False)
    if run.base_url:
        for contribution in run.hosted:
            _check_credentials(run, output, contribution)
    _skip_missing(run, credentials=True)
    return _report(run)


def _skip_missing(run: ContractRun, *, credentials: bool) -> None:
    """Add every check that did not run, skipped with the reason (`credentials` last)."""
    present = {(check.id, check.contribution) for check in run.checks}
    for contribution in run.hosted:
        checks = CHECKS[contribution]
        for check_id in checks.ids if credentials else checks.ids[:-1]:
            probe = checks.result(check_id)
            if (probe.id, probe.contribution) not in present:
                run.add(check_id, contribution=contribution).skip(_why_skipped(run))
                present.add((probe.id, probe.contribution))


def _report(run: ContractRun) -> dict[str, Any]:
    plugin: dict[str, Any] = {"manifest_path": str(run.manifest_path)}
    manifest = run.manifest
    if isinstance(manifest.get("id"), str):
        plugin["id"] = manifest["id"]
    if isinstance(manifest.get("version"), str):
        plugin["version"] = manifest["version"]
    if run.report.digest:
        plugin["manifest_digest"] = run.report.digest
    target: dict[str, Any] = {"mode": run.mode}
    if run.base_url:
        target["base_url"] = run.base_url
    checks = [check.as_json() for check in run.checks]
    summary = summarize(run.checks)
    value = {
        "report_version": "1",
        # a plugin that no check could judge is not certified
        "certified": summary["failed"] == 0 and summary["passed"] > 0,
        "plugin": plugin,
        "target": target,
        "engine_version": ENGINE_VERSION,
        "plugin_api_version": run.discovered_api or _spoken(run.report),
        "compatibility": _compatibility(run.report),
        "checks": checks,
        "summary": summary,
    }
    ids = [*QUIVR_CHECKS.ids, *INGESTION_CHECKS.ids]
    report_validator(ids, tuple(CHECKS)).validate(value)
    return value


def _declares_contributions(document: Mapping[str, Any]) -> bool:
    """Whether a manifest's top-level mapping is a Quivr manifest's: it declares contributions."""
    return "contributions" in document


@dataclass(frozen=True)
class ContractRunner:
    """What `mnemon plugin inspect|test|dev` finds in the `mnemon.contract_runners` entry point.

    Attributes:
        manifest_name: the manifest file that selects this runner in a plugin's folder, and a
            file of any other content by that name.
        distribution: the distribution to install for it.
        inspect: `inspect_plugin`.
        certify: `certify_plugin`.
        develop: opens the `mnemon plugin dev` session of a plugin (`open_development`).
        judges: whether a manifest file, whatever its name, is one this runner judges, from
            its top-level mapping.
    """

    manifest_name: str
    distribution: str
    inspect: Callable[[Path], dict[str, Any]]
    certify: Callable[..., Awaitable[dict[str, Any]]]
    develop: Callable[..., Any]
    judges: Callable[[Mapping[str, Any]], bool] = _declares_contributions
