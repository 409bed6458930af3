"""A remote plugin's record kinds, driven by `mnemon list`, `export`, `import` and `forget`.

The tasks plugin (`plugins/tasks/`) is written against the server kit and declares a
readable, writable and deletable kind; a profile mounts it through the client Source, launched
on loopback, and the commands run as a person runs them. The same plugin answering
`records-read` outside the kind's shape costs only its own records, and says so without
quoting them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import mnemon_remote
import pytest
import yaml
from click.testing import CliRunner
from mnemon_remote import RemoteSettings, create_app, define_remote_source
from remote_kit import TOKEN

from mnemon import ManagementResult, RevisionConflict
from mnemon._cli._commands import main
from mnemon.sdk import (
    PluginContext,
    SourceFacts,
    ViewContribution,
    define_memory_source,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner, SelectAll

PLUGINS = Path(__file__).parent / "plugins"
# what the plugin's answer outside the shape carries in a record (serve_tasks.LEAKED)
LEAKED = "Ada's unlock code is 4711"
ADA = ("--user", "ada")
PROFILE = """\
data_dir = "data"

[strategy]
use = "general"

[[entries]]
id = "general"
plugin = "general"

[[entries]]
id = "tasks"
plugin = "remote"
[entries.config]
manifest = "plugins/tasks/mnemon-source.yaml"
launch = true
configuration = {{ data_dir = "{data}", answer = "{answer}" }}
"""


def project(folder: Path, answer: str = "honest") -> Path:
    """A profile in `folder` mounting the tasks plugin, launched on loopback by the host."""
    shutil.copytree(PLUGINS / "tasks", folder / "plugins" / "tasks")
    profile = PROFILE.format(data=folder / "tasks-data", answer=answer)
    (folder / "mnemon.toml").write_text(profile, encoding="utf-8")
    return folder


def mnemon(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`mnemon --no-color ARGUMENTS` on `cwd`'s profile, run by `main()` in this process.

    The host it opens launches the plugin in a process of its own and stops it at the end.
    """
    variables = {"MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1", "MNEMON_PROFILE": None}
    with CliRunner().isolation(env=variables) as (out, err, _):
        try:
            main(["--no-color", "--profile", str(cwd / "mnemon.toml"), *arguments])
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        texts = [stream.getvalue().decode("utf-8") for stream in (out, err)]
    return subprocess.CompletedProcess(arguments, status, *texts)


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def tasks_file(folder: Path, titles: list[str]) -> Path:
    lines: list[dict[str, Any]] = [
        {"format": "mnemon-export", "version": 2, "scope": {"user_id": "ada"}},
        *(
            {"source": "source:tasks", "type": "tasks", "kind": "task", "record": {"title": t}}
            for t in titles
        ),
    ]
    lines.append({"kind": "end", "records": len(titles)})
    path = folder / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_a_remote_plugins_records_are_imported_listed_exported_and_forgotten(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path / "one")
    source = tasks_file(tmp_path, ["Buy milk", "Call Bo"])
    imported = as_json(mnemon(folder, "import", str(source), *ADA, "--yes", "--json"))
    # the plugin commits each task: written, and not merely accepted
    assert (imported["written"], imported["accepted"], imported["refused"]) == (2, 0, 0)
    again = as_json(mnemon(folder, "import", str(source), *ADA, "--yes", "--json"))
    assert (again["written"], again["unchanged"]) == (0, 2)

    listed = as_json(mnemon(folder, "list", *ADA, "--json"))
    assert [(i["source"], i["kind"], i["id"], i["title"]) for i in listed["items"]] == [
        ("source:tasks", "task", "t-1", "Buy milk"),
        ("source:tasks", "task", "t-2", "Call Bo"),
    ]
    assert listed["skipped"] == []

    out = tmp_path / "ada.jsonl"
    assert as_json(mnemon(folder, "export", *ADA, "--out", str(out), "--json"))["records"] == 2
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["sources"] == [{"source": "source:tasks", "type": "tasks", "kinds": ["task"]}]
    assert {"source": "source:tasks", "type": "tasks", "kind": "task",
            "record": {"id": "t-1", "title": "Buy milk", "done": False}} in lines  # fmt: skip

    # the export goes into another person's tasks, through the same plugin
    moved = as_json(mnemon(folder, "import", str(out), "--user", "cy", "--yes", "--json"))
    assert (moved["written"], moved["unchanged"]) == (2, 0)
    cy = as_json(mnemon(folder, "list", "--user", "cy", "--json"))["items"]
    assert [item["title"] for item in cy] == ["Buy milk", "Call Bo"]

    gone = as_json(mnemon(folder, "forget", "t-1", *ADA, "--kind", "task", "--yes", "--json"))
    assert gone == {"source_key": "source:tasks", "kind": "task", "id": "t-1", "forgotten": True}
    left = as_json(mnemon(folder, "list", *ADA, "--json"))["items"]
    assert [item["id"] for item in left] == ["t-2"]
    missing = mnemon(folder, "forget", "t-1", *ADA, "--yes", "--json")
    assert json.loads(missing.stdout)["error"]["code"] == "not-found"


def test_records_read_answered_outside_the_shape_is_skipped_never_quoted(tmp_path: Path) -> None:
    folder = project(tmp_path, answer="outside-shape")
    listed = mnemon(folder, "list", *ADA, "--json")
    report = as_json(listed)
    assert report["items"] == []
    (skipped,) = report["skipped"]
    assert skipped["source_key"] == "source:tasks"
    assert skipped["reason"].startswith("contract: ")
    assert "records[0]" in skipped["reason"]
    shown = mnemon(folder, "list", *ADA)
    assert "source:tasks skipped: contract: " in shown.stdout + shown.stderr
    exported = mnemon(folder, "export", *ADA, "--out", str(tmp_path / "out.jsonl"), "--json")
    assert exported.returncode == 1
    assert json.loads(exported.stdout)["error"]["code"] == "contract"
    assert not (tmp_path / "out.jsonl").exists()  # nothing half written
    imported = mnemon(folder, "import", str(tasks_file(tmp_path, ["Plan"])), *ADA, "--yes")
    assert imported.returncode == 1
    assert "nothing was imported" in imported.stderr
    for result in (listed, shown, exported, imported):
        assert LEAKED not in result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr


def _tasks_manifest() -> Path:
    return PLUGINS / "tasks" / "mnemon-source.yaml"


async def test_a_stale_revision_is_refused_before_the_plugin_writes(tmp_path: Path) -> None:
    config = {
        "manifest": str(_tasks_manifest()),
        "launch": True,
        "configuration": {"data_dir": str(tmp_path / "tasks")},
    }
    async with MemoryCompositionRunner() as runner:
        await runner.mount(mnemon_remote, instance_id="tasks", config=config)
        await runner.mount(SelectAll(), instance_id="all", config={"required": False})
        client = runner.management_client("source:tasks", {"user_id": "ada"})
        before = await client.revision()
        record = {"record": {"title": "Buy milk"}, "idempotency_key": "k-1"}
        payload = {"kind": "task", "records": [record]}
        await client.mutate("records-write", payload, confirmed=True, expected_revision=before)
        with pytest.raises(RevisionConflict):
            await client.mutate(
                "records-delete",
                {"kind": "task", "id": "t-1"},
                confirmed=True,
                expected_revision=before,
            )
        page = await client.read("records-read", {"kind": "task", "limit": 10})
    assert [task["title"] for task in page["records"]] == ["Buy milk"]


class _Moving:
    """A Source whose data moves between the host's fence and the write: it refuses each."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def facts(self, request: Any) -> SourceFacts:
        return SourceFacts(
            instance_key=self.key, type_id="tasks", role="tasks", availability="ready",
            revision="r1", capabilities=("project",),
        )  # fmt: skip

    async def project(self, request: Any) -> ViewContribution:
        return ViewContribution(fragments=())

    async def manage(self, request: Any) -> ManagementResult:
        raise RevisionConflict("the tasks changed")


async def test_a_conflict_the_plugin_finds_reaches_the_host_as_a_revision_conflict(
    tmp_path: Path,
) -> None:
    manifest = yaml.safe_load(_tasks_manifest().read_text(encoding="utf-8"))
    definition = define_memory_source(
        {**manifest["source"], "package_name": manifest["id"]},
        lambda init: _Moving(init.instance_key),
    )
    app = create_app(definition, _tasks_manifest(), token=TOKEN, configuration={})
    transport = httpx.ASGITransport(app=app)

    class Over:
        def apply(self, ctx: PluginContext) -> None:
            settings = RemoteSettings(ctx.configuration, token=TOKEN)
            install_memory(ctx, sources=[define_remote_source(settings, transport)])

    config = {"manifest": str(_tasks_manifest()), "endpoint": "http://127.0.0.1"}
    async with MemoryCompositionRunner() as runner:
        await runner.mount(Over(), instance_id="tasks", config=config)
        await runner.mount(SelectAll(), instance_id="all", config={"required": False})
        client = runner.management_client("source:tasks", {"user_id": "ada"})
        with pytest.raises(RevisionConflict):
            await client.mutate(
                "records-delete", {"kind": "task", "id": "t-1"}, confirmed=True,
                expected_revision=await client.revision(),
            )  # fmt: skip
