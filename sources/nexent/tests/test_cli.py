"""A Nexent provider folder through the `mnemon` command: a profile, a read, a write, the debug log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from nexent_fake import PLUGINS, FakeService

MNEMON = str(Path(sys.executable).with_name("mnemon"))
API_KEY = "sk-live-0123456789abcdef"
FAILING = """
from nexent.memory.models import ProviderError, ProviderErrorCode, ProviderErrorSeverity
from nexent.memory.providers.retry import RetryableProviderError


class Failing:
    def __init__(self, config):
        self.key = config["api_key"]

    async def search(self, request, limit=5, filters=None):
        error = ProviderError(code=ProviderErrorCode.UNKNOWN, message=f"key {self.key}",
                              severity=ProviderErrorSeverity.RETRYABLE)
        raise RetryableProviderError(f"upstream refused key {self.key}", error)
"""


@pytest.fixture
def service() -> Iterator[FakeService]:
    fake = FakeService()
    yield fake
    fake.close()


def mnemon(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    variables = {**os.environ, "MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1"}
    variables.pop("MNEMON_PROFILE", None)
    return subprocess.run(
        [MNEMON, "--no-color", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=variables,
    )


def profile(folder: Path, plugin: str, endpoint: str) -> None:
    (folder / "mnemon.toml").write_text(
        "[strategy]\n"
        'use = "general"\n'
        "[[entries]]\n"
        'id = "general"\n'
        'plugin = "general"\n'
        "[[entries]]\n"
        'id = "mem"\n'
        'use = "mnemon_source_nexent"\n'
        "[entries.config]\n"
        'plugin_dir = "memory-provider-plugins"\n'
        f'"plugin.name" = "{plugin}"\n'
        f'"plugin.endpoint" = "{endpoint}"\n'
        f'"plugin.api_key" = "{API_KEY}"\n',
        encoding="utf-8",
    )


def test_a_provider_folder_reads_and_writes_through_the_cli(
    tmp_path: Path, service: FakeService
) -> None:
    shutil.copytree(PLUGINS / "reference", tmp_path / "memory-provider-plugins" / "reference")
    profile(tmp_path, "reference", service.url)
    scope = ("--user", "ada", "--tenant", "acme")
    wrote = mnemon(
        tmp_path, "act", "source:mem/ingest", '{"units": [{"content": "Ada drinks green tea"}]}',
        "--yes", "--json", *scope,
    )  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    receipt = json.loads(wrote.stdout)
    assert (receipt["completion"], receipt["detail"]["accepted_count"]) == ("accepted", 1)
    read = mnemon(tmp_path, "route", "source:mem/search", '{"query": "tea"}', "--json", *scope)
    assert read.returncode == 0, read.stderr
    [item] = json.loads(read.stdout)["items"]
    assert item["text"] == "Ada drinks green tea"
    assert API_KEY not in wrote.stdout + wrote.stderr + read.stdout + read.stderr


def test_debug_names_the_exception_and_its_origin_code_never_its_text(tmp_path: Path) -> None:
    folder = tmp_path / "memory-provider-plugins" / "failing"
    folder.mkdir(parents=True)
    (folder / "plugin.yaml").write_text(
        'name: failing\nversion: "1.0.0"\nentry_point: provider.py\nclass_name: Failing\n'
        "implements: [searchable]\n"
        "config_schema: [{key: api_key, type: secret, required: true}, {key: endpoint}]\n",
        encoding="utf-8",
    )
    (folder / "provider.py").write_text(FAILING, encoding="utf-8")
    profile(tmp_path, "failing", "http://127.0.0.1:9")
    failed = mnemon(
        tmp_path, "--debug", "route", "source:mem/search", '{"query": "tea"}', "--user", "ada"
    )
    assert failed.returncode != 0
    assert "unknown" in failed.stdout + failed.stderr
    assert "raised RetryableProviderError (origin code unknown)" in failed.stderr
    assert API_KEY not in failed.stdout + failed.stderr


def test_an_export_of_memories_is_imported_into_the_provider_and_said_only_accepted(
    tmp_path: Path, service: FakeService
) -> None:
    shutil.copytree(PLUGINS / "reference", tmp_path / "memory-provider-plugins" / "reference")
    profile(tmp_path, "reference", service.url)
    export = tmp_path / "memories.jsonl"
    lines = [
        {"format": "mnemon-export", "version": 1, "scope": {"user_id": "ada"}},
        {"kind": "memory", "source": "source:spaces", "space": "personal", "text": "Ada: tea"},
        {"kind": "memory", "source": "source:spaces", "space": "personal", "text": "Ada: jazz"},
        {"kind": "end", "records": 2},
    ]
    export.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    first = mnemon(tmp_path, "import", str(export), "--yes")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "imported 2 of 2 record(s) (2 of them accepted by a store" in first.stdout
    second = mnemon(tmp_path, "import", str(export), "--yes", "--json")
    assert json.loads(second.stdout)["accepted"] == 2
    ingests = [body for path, body, _ in service.requests if path == "/ingest"]
    assert [[u["content"] for u in body["units"]] for body in ingests] == [
        ["Ada: tea", "Ada: jazz"]
    ] * 2
    # the same records name the same events: a provider that deduplicates keeps one of each
    assert [u["event_id"] for u in ingests[0]["units"]] == [
        u["event_id"] for u in ingests[1]["units"]
    ]
