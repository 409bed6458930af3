"""`mnemon manage ENTRY [OPERATION] [JSON]`: any Source's management operations, confirmed and fenced.

The example is a Nexent provider disabled by a 401 and re-enabled by an operator.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnemon import Evidence, View, load_profile
from tests.second_memory import ADA, API_KEY, Command, nexent_service, with_second_memory

USER = ("--user", "ada")


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with nexent_service(monkeypatch) as running:
        yield running


@pytest.fixture
def mnemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: Any) -> Command:
    mnemon = Command(tmp_path, monkeypatch)
    with_second_memory(mnemon, tmp_path, service.url)
    return mnemon


def recall(folder: Path) -> tuple[View, Evidence]:
    """One turn of the model: its View, and its recall of `tea`."""

    async def turn() -> tuple[View, Evidence]:
        profile = load_profile(folder / "mnemon.toml")
        async with profile.open_host() as host, host.turn(scope=ADA) as opened:
            found = await opened.execute_route("source:spaces/recall", {"query": "tea"})
            return opened.view, found

    return anyio.run(turn)


def status(mnemon: Command) -> Any:
    shown = mnemon("manage", "mem0", "status", *USER, "--json")
    assert shown.status == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_provider_disabled_by_a_401_is_re_enabled_by_an_operator(
    tmp_path: Path, mnemon: Command, service: Any
) -> None:
    # no tenant in the scope: Nexent's requests carry an empty one
    service.memories[("", "ada", None)].append({"id": "e1", "content": "Ada likes tea."})
    service.fail_next(401)
    _, refused = recall(tmp_path)
    # the turn went on without it, and said why with a code only
    assert refused.output["failed"] == ({"source_key": "source:mem0", "code": "unauthorized"},)
    view, _ = recall(tmp_path)
    assert "source:mem0" not in [route.source_key for route in view.policy_routes]
    assert any("provider-access-revoked" in d.message for d in view.diagnostics)

    listed = mnemon("manage", "mem0", *USER)
    assert listed.status == 0, listed.stderr
    assert "source:mem0 (nexent-provider)" in listed.stdout
    assert "status            read: The provider's state." in listed.stdout
    assert "enable            mutate: Re-enable the provider" in listed.stdout
    before = status(mnemon)
    assert before["output"]["disabled"] == "unauthorized"
    assert before["output"]["config"]["api_key"] == "sk-***4242"  # masked

    asked = mnemon("manage", "mem0", "enable", *USER, stdin="n\n")
    assert asked.status == 1
    assert "Run enable on source:mem0? [y/N]" in asked.stdout
    assert "nothing was changed: you did not confirm" in asked.stderr
    stale = mnemon("manage", "mem0", "enable", *USER, "--expected-revision", "state:old", "--yes")
    assert stale.status == 1
    assert "nothing was changed: revision conflict" in stale.stderr
    assert status(mnemon)["output"]["disabled"] == "unauthorized"

    enabled = mnemon(
        "manage", "mem0", "enable", *USER, "--expected-revision", before["revision"], "--yes"
    )
    assert enabled.status == 0, enabled.stderr
    assert "enable: done by source:mem0" in enabled.stdout
    assert status(mnemon)["output"]["disabled"] is None
    view, found = recall(tmp_path)
    assert "source:mem0/search" in [route.id for route in view.policy_routes]
    assert "Ada likes tea." in [item.text for item in found.items]
    every = listed.stdout + asked.stdout + stale.stdout + enabled.stdout + str(before)
    every += listed.stderr + asked.stderr + stale.stderr + enabled.stderr
    assert API_KEY not in every  # the provider's 401 message carries it


def test_without_a_revision_read_first_the_change_reads_it_itself(mnemon: Command) -> None:
    enabled = mnemon("manage", "source:mem0", "enable", *USER, "--yes", "--json")
    assert enabled.status == 0, enabled.stderr
    result = json.loads(enabled.stdout)
    assert (result["source_key"], result["operation"], result["kind"]) == (
        "source:mem0",
        "enable",
        "mutate",
    )
    assert result["output"]["disabled"] is None


@pytest.mark.parametrize(
    ("arguments", "status", "code", "message"),
    [
        pytest.param(
            ("manage", "nope"),
            1,
            "unknown-source",
            "no Source source:nope is mounted (Sources with management operations: ",
            id="unknown-entry",
        ),
        pytest.param(
            ("manage", "mem0", "enabel", *USER),
            1,
            "unknown-operation",
            "source:mem0 has no management operation 'enabel' "
            "(operations: status, enable, records-write); did you mean 'enable'?",
            id="unknown-operation",
        ),
        pytest.param(
            ("manage", "mem0", "status", "{not json", *USER),
            2,
            "invalid-flag",
            "JSON: not valid JSON (line 1, column 2)",
            id="invalid-json",
        ),
        pytest.param(
            ("manage", "mem0", "status", '{"api_key": "sk-leaked-9999"}', *USER),
            1,
            "invalid-input",
            "source:mem0/status input: unsupported property 'api_key'",
            id="input-outside-the-schema",
        ),
        pytest.param(
            ("manage", "mem0", "status", *USER, "--expected-revision", "state:x"),
            2,
            "invalid-flag",
            "--expected-revision: status only reads; a change is what it fences",
            id="a-read-is-not-fenced",
        ),
        pytest.param(
            ("manage", "mem0", "enable", "--yes"),
            1,
            "no-revision",
            "source:mem0 reports no revision in this scope (add --user), so enable cannot be "
            "fenced",
            id="no-identity-no-fence",
        ),
    ],
)
def test_errors_name_what_is_wrong_and_exit_non_zero(
    mnemon: Command, arguments: tuple[str, ...], status: int, code: str, message: str
) -> None:
    failed = mnemon(*arguments)
    assert failed.status == status
    assert message in failed.stderr
    assert "sk-leaked-9999" not in failed.stdout + failed.stderr
    as_json = mnemon(*arguments, "--json")
    assert as_json.status == status
    error = json.loads(as_json.stdout)["error"]
    assert (error["code"], error["exit_code"]) == (code, status)
    assert message in error["message"]


def test_an_entry_without_operations_is_named_as_such(
    tmp_path: Path, mnemon: Command, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the Raven entry has one now (records-write, for imports): a plain Source has none
    listed = mnemon("manage", "raven", *USER)
    assert listed.status == 0, listed.stderr
    assert "records-write" in listed.stdout
    (tmp_path / "plain_source.py").write_text(
        "from mnemon_testing import StubSource\n\nplain = StubSource(text='A plain memory.')\n",
        encoding="utf-8",
    )
    profile = tmp_path / "mnemon.toml"
    entry = '\n[[entries]]\nid = "plain"\nuse = "plain_source:plain"\n'
    profile.write_text(profile.read_text(encoding="utf-8") + entry, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    failed = mnemon("manage", "plain")
    assert failed.status == 1
    assert "source:plain has no management operations" in failed.stderr
    error = json.loads(mnemon("manage", "plain", "--json").stdout)["error"]
    assert (error["code"], error["exit_code"]) == ("no-management", 1)
