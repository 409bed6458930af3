"""`mnemon plugin test` on a Quivr ingestion plugin: its checks, each failed by one defect.

The reference ingestion plugin (`embedders/quivr_embedder.py`) is launched by the run
convention on loopback, every request to it signed with its per-launch key, and certified on
Quivr's normative `article.json` and its own `fixtures/mornings.json`; one deliberately broken
plugin per check fails exactly that check. Its mode is an argument of `run.command`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from launched import EMBEDDERS, edit_manifest, embedder_folder, with_retrieval
from mnemon_strategy_quivr import certify_plugin, inspect_plugin
from quivr_fixtures import rows

MNEMON = Path(sys.executable).parent / "mnemon"
ARTICLE = "contracts:ingestion/article.json"
OWN = "fixtures/mornings.json"
CHECK_ORDER = [
    "manifest",
    "compatibility",
    "health",
    "discovery",
    "fixtures",
    "invoke",
    "replay",
    "segments_only",
    "embed_query",
    "invalid_request",
    "credentials",
]


def _report_validator() -> Draft202012Validator:
    """Quivr's contract report v1 schema as vendored, with what it predates for ingestion."""
    text = resources.files("mnemon_remote").joinpath("schemas", "contract-report.schema.json")
    schema = json.loads(text.read_text(encoding="utf-8"))
    check = schema["$defs"]["Check"]["properties"]
    check["id"]["enum"] += ["credentials", "segments_only", "embed_query"]
    check["contribution"]["enum"] += ["ingestion", "retrieval"]
    return Draft202012Validator(schema)


def _failed(report: dict[str, Any]) -> dict[str, set[str]]:
    """Failed check ids, each with the codes of its issues."""
    failed: dict[str, set[str]] = {}
    for check in report["checks"]:
        if check["status"] == "fail":
            failed.setdefault(check["id"], set()).update(i["code"] for i in check["issues"])
    return failed


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


def test_the_reference_embedder_is_certified_by_mnemon_plugin_test(tmp_path: Path) -> None:
    if not MNEMON.exists():
        pytest.skip("the `mnemon` command (mnemon-runtime[cli]) is not installed here")
    try:
        metadata.distribution("mnemon-remote")
    except metadata.PackageNotFoundError:
        pytest.skip("`mnemon plugin` comes with mnemon-remote, which is not installed here")
    report_path = tmp_path / "report.json"
    result = subprocess.run(
        [str(MNEMON), "plugin", "test", "--report", str(report_path), str(EMBEDDERS)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "certified: 23 passed, 0 failed, 0 skipped" in result.stdout
    assert "hashing embedder starting" in result.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    _report_validator().validate(report)
    assert report["plugin"]["id"] == "mnemon.hashing"
    assert report["plugin_api_version"] == "0.14.0"
    ids = [check["id"] for check in report["checks"]]
    assert ids == sorted(ids, key=CHECK_ORDER.index)
    assert all(c["contribution"] == "ingestion" for c in report["checks"][4:])
    by_fixture = {(c["id"], c.get("fixture")) for c in report["checks"]}
    for check_id in ("invoke", "replay", "segments_only", "embed_query"):
        assert {(check_id, ARTICLE), (check_id, OWN)} <= by_fixture
    probes = {c["fixture"] for c in report["checks"] if c["id"] == "invalid_request"}
    normative = {
        f"contracts:{row['file']}" for row in rows("requests/ingestion/") if not row["valid"]
    }
    assert (
        probes
        == {
            f"{route}:{probe}"
            for route in ("segment_and_embed", "embed_query")
            for probe in ("non-json-body", "unknown-field", "undeclared-space")
        }
        | normative
    )


async def test_a_plugin_declaring_ingestion_and_retrieval_is_certified_for_both(
    tmp_path: Path,
) -> None:
    manifest = embedder_folder(tmp_path / "plugin")
    edit_manifest(manifest.parent, with_retrieval)
    report = await certify_plugin(manifest.parent, startup_timeout=5.0)
    _report_validator().validate(report)
    assert report["certified"] is True, _failed(report)
    contributions = [c.get("contribution") for c in report["checks"]]
    # the whole plugin's checks, then ingestion's, then retrieval's, then the credentials
    assert contributions.index("retrieval") > max(
        i for i, c in enumerate(contributions[:-2]) if c == "ingestion"
    )
    assert {(c["id"], c.get("contribution")) for c in report["checks"][-2:]} == {
        ("credentials", "ingestion"),
        ("credentials", "retrieval"),
    }
    assert report["summary"] == {"passed": 32, "failed": 0, "skipped": 0}


def _own_fixture(change: Any) -> Any:
    def edit(folder: Path) -> None:
        path = folder / "fixtures" / "mornings.json"
        fixture = json.loads(path.read_text(encoding="utf-8"))
        change(fixture["ingestion"])
        path.write_text(json.dumps(fixture), encoding="utf-8")

    return edit


def _undeclared_space(ingestion: dict[str, Any]) -> None:
    ingestion["spaces"] = ["mnemon.hashing.elsewhere"]


def _one_segment_expected(ingestion: dict[str, Any]) -> None:
    ingestion["expect"]["segments"] = ingestion["expect"]["segments"][:1]


def _lexical_text_expected(ingestion: dict[str, Any]) -> None:
    ingestion["expect"]["lexical_text"] = True


# one broken plugin per check: (check, plugin mode, folder change, codes)
BROKEN = [
    ("discovery", "wrong_digest", None, {"discovery_mismatch"}),
    ("fixtures", "correct", _own_fixture(_undeclared_space), {"invalid_fixture"}),
    ("invoke", "offsets", None, {"offset_out_of_range"}),
    ("invoke", "overflow", None, {"invalid_vector"}),
    ("invoke", "too_large", None, {"response_too_large"}),
    ("invoke", "correct", _own_fixture(_one_segment_expected), {"unexpected_segments"}),
    ("invoke", "correct", _own_fixture(_lexical_text_expected), {"unexpected_segments"}),
    ("replay", "nondeterministic", None, {"nondeterministic_output"}),
    ("segments_only", "segments_differ", None, {"nondeterministic_output"}),
    ("embed_query", "query_drifts", None, {"nondeterministic_output"}),
    ("embed_query", "slow_query", None, {"deadline_exceeded"}),
    ("invalid_request", "accepts_invalid", None, {"accepted_invalid_request"}),
    ("invalid_request", "retryable_refusal", None, {"wrong_error_class"}),
    ("credentials", "leaks_secret", None, {"credential_leak"}),
    ("credentials", "leaks_secret_in_answer", None, {"credential_leak"}),
]


@pytest.mark.parametrize(
    ("check", "mode", "folder_change", "codes"),
    BROKEN,
    ids=[f"{case[0]}-{case[1]}-{i}" for i, case in enumerate(BROKEN)],
)
async def test_a_broken_plugin_fails_exactly_its_check(
    tmp_path: Path, check: str, mode: str, folder_change: Any, codes: set[str]
) -> None:
    manifest = embedder_folder(tmp_path / "plugin", "--mode", mode)
    if folder_change is not None:
        folder_change(manifest.parent)
    report = await certify_plugin(manifest.parent, startup_timeout=5.0)
    _report_validator().validate(report)
    assert report["certified"] is False
    assert _failed(report) == {check: codes}


async def test_segments_alone_are_not_asked_of_a_plugin_limited_to_0_7(tmp_path: Path) -> None:
    manifest = embedder_folder(tmp_path / "plugin", "--plugin-api", "0.7.0")

    def before_0_8(value: dict[str, Any]) -> None:
        value["compatibility"]["plugin_api"] = ">=0.6.0 <0.8.0"

    edit_manifest(manifest.parent, before_0_8)
    report = await certify_plugin(manifest.parent, startup_timeout=5.0)
    assert report["certified"] is True, _failed(report)
    skipped = [c for c in report["checks"] if c["status"] == "skip"]
    assert {c["id"] for c in skipped} == {"segments_only"}
    assert "does not admit 0.8" in skipped[0]["note"]


async def test_a_running_plugin_is_certified_at_its_endpoint(tmp_path: Path) -> None:
    sys.path.insert(0, str(EMBEDDERS))
    import quivr_embedder

    server = quivr_embedder.serve("127.0.0.1", 0)
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        report = await certify_plugin(EMBEDDERS, endpoint=endpoint)
    finally:
        server.shutdown()
        server.server_close()
    assert report["certified"] is True, _failed(report)
    assert report["target"] == {"mode": "endpoint", "base_url": endpoint}
    # secrets reach a plugin only when the runner launches it
    [credentials] = [c for c in report["checks"] if c["id"] == "credentials"]
    assert credentials["status"] == "skip"


def test_an_ingestion_plugin_is_a_plugin_mnemon_hosts() -> None:
    value = inspect_plugin(EMBEDDERS)
    assert value["valid"] is True
    assert value["issues"] == []


def test_a_manifest_with_neither_contribution_mnemon_hosts_lists_what_it_declares(
    tmp_path: Path,
) -> None:
    manifest = yaml.safe_load((EMBEDDERS / "quivr-plugin.yaml").read_text(encoding="utf-8"))
    del manifest["contributions"]["ingestion"]
    manifest["contributions"]["normalizer"] = {"media_types": ["text/plain"]}
    (tmp_path / "quivr-plugin.yaml").write_text(json.dumps(manifest), encoding="utf-8")
    value = inspect_plugin(tmp_path)
    assert (value["valid"], value["issues"], value["hosted"]) == (True, [], False)
    [normalizer] = value["contributions"]
    assert (normalizer["name"], normalizer["hosted"]) == ("normalizer", False)
