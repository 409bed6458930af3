"""The contract runner's Quivr-compat mode: `mnemon plugin test` on a quivr-plugin.yaml.

The reference ranker is launched by the run convention on loopback (QUIVR_PLUGIN_HOST,
QUIVR_PLUGIN_PORT, QUIVR_PLUGIN_MANIFEST) and certified on Quivr's normative newsroom.json;
one deliberately broken ranker per check fails exactly that check. Its mode is an argument of
`run.command`: the launched ranker does not inherit the test's environment.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from launched import edit_manifest, ended_within, kill, ranker_folder, recorded
from mnemon_strategy_quivr import certify_plugin, inspect_plugin
from quivr_fixtures import load, rows

sys.path.insert(0, str(Path(__file__).parent / "rankers"))
import quivr_ranker

RANKERS = Path(__file__).parent / "rankers"
MNEMON = Path(sys.executable).parent / "mnemon"
NEWSROOM = "contracts:retrieval/newsroom.json"
CHECK_ORDER = [
    "manifest",
    "compatibility",
    "health",
    "discovery",
    "fixtures",
    "invoke",
    "replay",
    "invalid_request",
    "credentials",
]


def _report_validator() -> Draft202012Validator:
    """Quivr's contract report v1 schema as vendored, with its two documented additions."""
    # one vendored copy, mnemon-remote's: both contract runners report in its shape
    text = resources.files("mnemon_remote").joinpath("schemas", "contract-report.schema.json")
    schema = json.loads(text.read_text(encoding="utf-8"))
    check = schema["$defs"]["Check"]["properties"]
    # newer than the vendored schema: the credentials check, and retrieval checks
    check["id"]["enum"].append("credentials")
    check["contribution"]["enum"].append("retrieval")
    return Draft202012Validator(schema)


def _mnemon(*args: str) -> subprocess.CompletedProcess[str]:
    if not MNEMON.exists():
        pytest.skip("the `mnemon` command (mnemon-runtime[cli]) is not installed here")
    try:
        metadata.distribution("mnemon-remote")
    except metadata.PackageNotFoundError:
        pytest.skip("`mnemon plugin` comes with mnemon-remote, which is not installed here")
    environment = {
        **os.environ,
        # run.command is `python3 quivr_ranker.py`: the interpreter of the tests
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        [str(MNEMON), "plugin", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A copy of the reference ranker's folder, to edit."""
    return ranker_folder(tmp_path / "ranker").parent


def _mode(folder: Path, mode: str) -> None:
    edit_manifest(folder, lambda manifest: manifest["run"]["command"].extend(["--mode", mode]))


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


def _failed(report: dict[str, Any]) -> dict[str, set[str]]:
    """Failed check ids, each with the codes of its issues."""
    failed: dict[str, set[str]] = {}
    for check in report["checks"]:
        if check["status"] == "fail":
            failed.setdefault(check["id"], set()).update(i["code"] for i in check["issues"])
    return failed


def test_the_reference_ranker_is_certified_by_mnemon_plugin_test(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = _mnemon("test", "--report", str(report_path), str(RANKERS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "certified: 14 passed, 0 failed, 0 skipped" in result.stdout
    # the plugin's own output goes to stderr, the human report to stdout
    assert "bm25 ranker starting" in result.stderr
    assert "bm25 ranker starting" not in result.stdout
    report = json.loads(report_path.read_text(encoding="utf-8"))
    _report_validator().validate(report)
    assert report["certified"] is True
    assert report["summary"] == {"passed": 14, "failed": 0, "skipped": 0}
    assert report["target"]["mode"] == "launch"
    assert report["target"]["base_url"].startswith("http://127.0.0.1:")
    manifest = (RANKERS / "quivr-plugin.yaml").read_bytes()
    assert report["plugin"] == {
        "manifest_path": str(RANKERS / "quivr-plugin.yaml"),
        "id": "mnemon.bm25",
        "version": "0.1.0",
        "manifest_digest": "sha256:" + hashlib.sha256(manifest).hexdigest(),
    }
    assert report["engine_version"] == "0.1.0"
    assert report["plugin_api_version"] == "0.14.0"
    assert report["compatibility"]["plugin_api"] == {
        "range": ">=0.7.0 <0.15.0",
        "version": "0.14.0",
        "compatible": True,
    }
    ids = [check["id"] for check in report["checks"]]
    assert ids == sorted(ids, key=CHECK_ORDER.index)
    invoked = [
        (c["fixture"], c["title"].split()[1]) for c in report["checks"] if c["id"] == "invoke"
    ]
    assert invoked == [(NEWSROOM, "default"), (NEWSROOM, "hasty")]
    assert all(c["note"] == "3 hits in 2 rounds" for c in report["checks"] if c["id"] == "invoke")
    probes = {c["fixture"] for c in report["checks"] if c["id"] == "invalid_request"}
    normative = {
        f"contracts:{row['file']}" for row in rows("requests/retrieval/") if not row["valid"]
    }
    assert probes == {
        "search:non-json-body",
        "search:unknown-field",
        "search:undeclared-profile",
        *normative,
    }
    assert all(c["contribution"] == "retrieval" for c in report["checks"][4:])


def test_a_broken_ranker_exits_1_and_names_the_failed_check(plugin_dir: Path) -> None:
    _mode(plugin_dir, "unserved_candidate")
    result = _mnemon("test", str(plugin_dir))
    assert result.returncode == 1
    assert "FAIL invoke" in result.stdout
    assert "unserved_candidate" in result.stdout
    assert "NOT certified" in result.stdout


def test_inspect_a_quivr_manifest(tmp_path: Path) -> None:
    result = _mnemon("inspect", "--json", str(RANKERS))
    assert result.returncode == 0, result.stderr
    value = json.loads(result.stdout)
    assert value["valid"] is True
    assert value["id"] == "mnemon.bm25"
    assert value["plugin_api_version"] == "0.14.0"
    assert value["compatibility"]["engine"]["compatible"] is True
    # a normalizer plugin is a valid Quivr plugin mnemon cannot host: listed, not an error
    (tmp_path / "quivr-plugin.yaml").write_bytes(
        (Path(__file__).parent / "fixtures/quivr/fixtures/manifests/valid/full.yaml").read_bytes()
    )
    result = _mnemon("inspect", str(tmp_path))
    assert result.returncode == 0, result.stdout
    assert "normalizer: not hosted (" in result.stdout
    value = inspect_plugin(tmp_path)
    assert (value["valid"], value["issues"], value["hosted"]) == (True, [], False)
    assert value["contributions"][0]["name"] == "normalizer"


def test_usage_errors_exit_2(tmp_path: Path, plugin_dir: Path) -> None:
    (plugin_dir / "mnemon-source.yaml").write_text("id: x\n", encoding="utf-8")
    result = _mnemon("test", str(plugin_dir))
    assert result.returncode == 2
    assert "holds both mnemon-source.yaml and quivr-plugin.yaml" in result.stderr
    assert _mnemon("test", "--endpoint", "ftp://x", str(RANKERS)).returncode == 2


def test_without_the_quivr_package_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("mnemon_remote")
    click_testing = pytest.importorskip("click.testing")
    from mnemon._cli._commands import cli

    entry_points = metadata.entry_points

    def without_runners(**selection: Any) -> Any:
        if selection.get("group") == "mnemon.contract_runners":
            return metadata.EntryPoints(())
        return entry_points(**selection)

    monkeypatch.setattr(metadata, "entry_points", without_runners)
    result = click_testing.CliRunner().invoke(cli, ["plugin", "test", str(RANKERS)])
    assert result.exit_code == 2
    assert "pip install mnemon-strategy-quivr" in result.output


def _no_key(manifest: dict[str, Any]) -> None:
    manifest["unexpected_key"] = True


def _future_api(manifest: dict[str, Any]) -> None:
    manifest["compatibility"]["plugin_api"] = ">=0.15.0 <1.0.0"


def _bad_fixture(folder: Path) -> None:
    fixture = copy.deepcopy(load("retrieval/newsroom.json"))
    fixture["retrieval"]["expect"] = {"top": ["seg_nowhere"]}
    (folder / "fixtures").mkdir()
    (folder / "fixtures" / "broken.json").write_text(json.dumps(fixture), encoding="utf-8")


# one broken plugin per check: (check, ranker mode, manifest change, folder change, codes)
BROKEN = [
    ("manifest", "correct", _no_key, None, {"schema_violation"}),
    ("compatibility", "correct", _future_api, None, {"incompatible_plugin_api"}),
    ("health", "unhealthy", None, None, {"unhealthy"}),
    ("discovery", "wrong_digest", None, None, {"discovery_mismatch"}),
    ("discovery", "old_plugin_api", None, None, {"discovery_mismatch"}),
    ("fixtures", "correct", None, _bad_fixture, {"invalid_fixture"}),
    ("invoke", "duplicate_hit", None, None, {"duplicate_hit"}),
    ("replay", "nondeterministic", None, None, {"nondeterministic_output"}),
    ("invalid_request", "retryable_refusal", None, None, {"wrong_error_class"}),
    ("invalid_request", "accepts_invalid", None, None, {"accepted_invalid_request"}),
    ("credentials", "leaks_secret", None, None, {"credential_leak"}),
    ("credentials", "leaks_secret_in_answer", None, None, {"credential_leak"}),
]


@pytest.mark.parametrize(
    ("check", "mode", "manifest_change", "folder_change", "codes"),
    BROKEN,
    ids=[f"{case[0]}-{case[1]}" for case in BROKEN],
)
async def test_a_broken_plugin_fails_exactly_its_check(
    plugin_dir: Path,
    check: str,
    mode: str,
    manifest_change: Any,
    folder_change: Any,
    codes: set[str],
) -> None:
    _mode(plugin_dir, mode)
    if manifest_change is not None:
        edit_manifest(plugin_dir, manifest_change)
    if folder_change is not None:
        folder_change(plugin_dir)
    report = await certify_plugin(plugin_dir, startup_timeout=1.0)
    _report_validator().validate(report)
    assert report["certified"] is False
    assert _failed(report) == {check: codes}


@pytest.fixture
def endpoint() -> Any:
    servers = []

    def start(mode: str = "correct") -> str:
        server = quivr_ranker.serve("127.0.0.1", 0, mode)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


RULES = [
    ("too_many_requests", {"too_many_requests"}),
    ("candidate_limit", {"candidate_limit"}),
    ("too_many_rounds", {"too_many_rounds"}),
    ("unknown_space", {"unknown_space"}),
    ("plugin_dependency", {"plugin_dependency"}),
    ("schema_violation", {"schema_violation"}),
    ("unserved_candidate", {"unserved_candidate"}),
    ("over_budget", {"over_budget"}),
    ("response_too_large", {"response_too_large"}),
    ("refuses", {"plugin_refused"}),
    ("crashes", {"plugin_unavailable"}),
]


@pytest.mark.parametrize(("mode", "codes"), RULES, ids=[mode for mode, _ in RULES])
async def test_every_rule_a_ranking_breaks_fails_invoke(
    endpoint: Any, mode: str, codes: set[str]
) -> None:
    report = await certify_plugin(RANKERS, endpoint=endpoint(mode))
    assert _failed(report) == {"invoke": codes}
    # at a given endpoint the runner cannot hand the plugin secrets
    credentials = report["checks"][-1]
    assert credentials["status"] == "skip"
    assert credentials["note"] == "secrets reach a plugin only when the runner launches it"


async def test_a_deadline_fails_only_the_profile_that_overran(endpoint: Any) -> None:
    report = await certify_plugin(RANKERS, endpoint=endpoint("sluggish"))
    invoked = {c["title"].split()[1]: c for c in report["checks"] if c["id"] == "invoke"}
    assert invoked["default"]["status"] == "pass"
    assert [i["path"] for i in invoked["hasty"]["issues"]] == [
        "/contributions/retrieval/profiles/hasty/max_latency_ms"
    ]
    assert [c["status"] for c in report["checks"] if c["id"] == "replay"] == ["pass"]


async def test_the_plugins_own_fixtures_run_with_their_profiles(
    endpoint: Any, plugin_dir: Path
) -> None:
    fixture = copy.deepcopy(load("retrieval/newsroom.json"))
    fixture["retrieval"].update(
        {"limit": 2, "profiles": ["default"], "expect": {"top": ["seg_harbour"]}}
    )
    (plugin_dir / "fixtures").mkdir()
    (plugin_dir / "fixtures" / "harbour.json").write_text(json.dumps(fixture), encoding="utf-8")
    wrong = copy.deepcopy(fixture)
    wrong["retrieval"]["expect"] = {"top": ["seg_market"]}
    extra = plugin_dir.parent / "market-first.json"
    extra.write_text(json.dumps(wrong), encoding="utf-8")
    report = await certify_plugin(plugin_dir, endpoint=endpoint(), fixtures=[extra])
    fixtures = next(c for c in report["checks"] if c["id"] == "fixtures")
    assert fixtures["note"] == f"using {NEWSROOM}, fixtures/harbour.json, market-first.json"
    invoked = [(c["fixture"], c["status"]) for c in report["checks"] if c["id"] == "invoke"]
    assert invoked == [
        (NEWSROOM, "pass"),
        (NEWSROOM, "pass"),
        ("fixtures/harbour.json", "pass"),
        ("market-first.json", "fail"),
    ]
    assert _failed(report) == {"invoke": {"unexpected_ranking"}}


async def test_an_unreachable_endpoint_fails_health_and_skips_the_rest() -> None:
    report = await certify_plugin(RANKERS, endpoint="http://127.0.0.1:9", startup_timeout=0.2)
    assert _failed(report) == {"health": {"unhealthy"}}
    skipped = [c["note"] for c in report["checks"] if c["status"] == "skip"]
    assert skipped == ["skipped: the health check failed"] * 5 + [
        "secrets reach a plugin only when the runner launches it"
    ]


async def test_a_manifest_without_run_command_needs_an_endpoint(plugin_dir: Path) -> None:
    edit_manifest(plugin_dir, lambda manifest: manifest.pop("run"))
    report = await certify_plugin(plugin_dir)
    assert _failed(report) == {"health": {"no_run_command"}}


async def test_the_runner_leaves_no_process_of_the_plugin_behind(tmp_path: Path) -> None:
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--with-child", "--record", str(started))
    child = None
    try:
        report = await certify_plugin(manifest.parent, startup_timeout=5.0)
        child = recorded(started)["child"]
        assert report["certified"] is True
        # the ranker's worker ignores SIGTERM: the runner must end the whole process group
        assert ended_within(child, 1.0), "the plugin's child process outlived the run"
    finally:
        kill(child)


async def test_a_secret_named_like_a_run_convention_variable_does_not_replace_it(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--record", str(started))
    edit_manifest(
        manifest.parent,
        lambda m: m["secrets"].append(
            {"name": "QUIVR_PLUGIN_PORT", "description": "Named like the port.", "required": False}
        ),
    )
    report = await certify_plugin(manifest.parent, startup_timeout=5.0)
    environment = recorded(started)["environment"]
    served_on = report["target"].get("base_url", "").rpartition(":")[2]
    assert environment["QUIVR_PLUGIN_PORT"] == served_on
    assert report["certified"] is True


async def test_the_launched_plugin_gets_its_secrets_and_nothing_else_of_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_TEST_HOST_ONLY_SECRET", "host-only-value-0123456789")
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--record", str(started))
    report = await certify_plugin(manifest.parent, startup_timeout=5.0)
    assert report["certified"] is True
    environment = recorded(started)["environment"]
    assert "MNEMON_TEST_HOST_ONLY_SECRET" not in environment
    # the declared secret, with the runner's own fresh value
    assert environment["BM25_API_KEY"].startswith("quivr-contract-")
    assert environment["QUIVR_PLUGIN_HOST"] == "127.0.0.1"
    assert environment["QUIVR_PLUGIN_MANIFEST"] == str(manifest.resolve())


def _with_unhosted(manifest: dict[str, Any]) -> None:
    """Declare a normalizer and a connector beside retrieval, as Quivr's fixtures write them."""
    for name, fixture in (("normalizer", "full.yaml"), ("connector", "connector.yaml")):
        manifest["contributions"][name] = load(f"manifests/valid/{fixture}")["contributions"][name]
    manifest["run"]["command"].extend(["--also", "normalizer", "--also", "connector"])


async def test_what_mnemon_hosts_is_certified_and_the_rest_is_named(plugin_dir: Path) -> None:
    edit_manifest(plugin_dir, _with_unhosted)
    report = await certify_plugin(plugin_dir, startup_timeout=5.0)
    _report_validator().validate(report)
    assert report["certified"] is True, _failed(report)
    manifest_check = report["checks"][0]
    assert manifest_check["id"] == "manifest"
    assert manifest_check["status"] == "pass"
    assert manifest_check["note"].startswith("not hosted, not certified: normalizer: not hosted")
    assert "connector: not hosted" in manifest_check["note"]
    assert {c.get("contribution") for c in report["checks"][4:]} == {"retrieval"}


async def test_a_plugin_mnemon_hosts_nothing_of_is_not_certified(tmp_path: Path) -> None:
    (tmp_path / "quivr-plugin.yaml").write_bytes(
        (Path(__file__).parent / "fixtures/quivr/fixtures/manifests/valid/full.yaml").read_bytes()
    )
    report = await certify_plugin(tmp_path, startup_timeout=1.0)
    _report_validator().validate(report)
    assert report["certified"] is False
    assert _failed(report) == {"compatibility": {"not_hosted"}}
    [compatibility] = [c for c in report["checks"] if c["id"] == "compatibility"]
    assert [i["path"] for i in compatibility["issues"]] == ["/contributions/normalizer"]
    assert "no such pipeline" in compatibility["issues"][0]["message"]
    # nothing was launched: the manifest passed, every later check skipped with the reason
    assert report["checks"][0]["status"] == "pass"
    assert all(
        c["status"] == "skip" and c["note"] == "skipped: the compatibility check failed"
        for c in report["checks"][2:]
    )


def _stray_key_fixture(folder: Path) -> None:
    fixture = copy.deepcopy(load("retrieval/newsroom.json"))
    fixture["retrieval"]["candidates"][0]["score_hint"] = "tok_SECRET_value"
    (folder / "fixtures").mkdir()
    (folder / "fixtures" / "stray.json").write_text(json.dumps(fixture), encoding="utf-8")


async def test_a_fixture_breaking_its_schema_names_the_file_the_place_and_the_key(
    plugin_dir: Path,
) -> None:
    _mode(plugin_dir, "correct")
    _stray_key_fixture(plugin_dir)
    fixture = _issue(await certify_plugin(plugin_dir, startup_timeout=1.0), "fixtures")
    assert (fixture["code"], fixture["path"]) == ("invalid_fixture", "/retrieval/candidates/0")
    assert fixture["message"] == "fixtures/stray.json: unexpected property 'score_hint'"
    assert "SECRET" not in json.dumps(fixture)


async def test_a_manifest_breaking_its_schema_names_the_key(plugin_dir: Path) -> None:
    edit_manifest(plugin_dir, _no_key)
    manifest = _issue(await certify_plugin(plugin_dir, startup_timeout=1.0), "manifest")
    assert (manifest["code"], manifest["path"]) == ("schema_violation", "/")
    assert manifest["message"] == "unexpected property 'unexpected_key'"


def _issue(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    (check,) = [check for check in report["checks"] if check["id"] == check_id]
    return check["issues"][0]  # type: ignore[no-any-return]
