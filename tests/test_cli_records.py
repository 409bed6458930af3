"""`list`, `forget`, `export` and `import` drive a third party's Source that declares records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon import DefinitionError
from mnemon.sdk import define_memory_source
from tests.test_cli import mnemon

# a to-do Source a third party wrote against the public SDK: it keeps each user's tasks in a
# JSON file beside it, and declares them as records people can list, write and delete
PLUGINS = '''\
"""Third-party Sources that declare records: tasks, and one answering outside the shape."""

import hashlib
import json
from pathlib import Path

from mnemon import ManagementResult, SourceError
from mnemon.sdk import SourceFacts, ViewContribution, define_memory_source, install_memory

STORE = Path(__file__).with_name("tasks.json")
TASK = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string", "minLength": 1, "maxLength": 80},
        "done": {"type": "boolean"},
    },
    "required": ["title"],
    "additionalProperties": False,
}


def manifest(type_id, records):
    return {
        "type_id": type_id,
        "package_name": "acme-tasks",
        "role": "tasks",
        "capabilities": ["project"],
        "consistency": "exact-snapshot",
        "management": {"label": "Tasks", "description": "A user's tasks.", "records": records},
    }


def load():
    return json.loads(STORE.read_text()) if STORE.exists() else {}


class Tasks:
    def __init__(self, key):
        self.key = key

    def _mine(self, scope):
        if scope.user_id is None:
            raise SourceError("missing-scope", "tasks need a user")
        return load().get(scope.user_id, [])

    async def facts(self, request):
        tasks = load().get(request.scope.user_id or "", [])
        revision = hashlib.sha256(json.dumps(tasks).encode()).hexdigest()[:16]
        return SourceFacts(instance_key=self.key, type_id="tasks", role="tasks",
                           availability="ready", revision=revision, capabilities=("project",))

    async def project(self, request):
        return ViewContribution(fragments=())

    async def manage(self, request):
        tasks = self._mine(request.scope)
        value = request.input
        if request.operation.id == "records-read":
            start = int(value.get("cursor", "0"))
            end = start + value["limit"]
            output = {"records": tasks[start:end],
                      "next_cursor": str(end) if end < len(tasks) else None}
        elif request.operation.id == "records-write":
            results = []
            for index, item in enumerate(value["records"]):
                title = item["record"]["title"]
                if title.startswith("forbidden"):
                    results.append({"index": index, "completion": "refused",
                                    "code": "not-allowed", "message": "title: not allowed here"})
                    continue
                task = {"id": f"t-{len(tasks) + 1}", "title": title,
                        "done": item["record"].get("done", False)}
                tasks.append(task)
                results.append({"index": index, "completion": "committed", "id": task["id"]})
            self._save(request.scope, tasks)
            output = {"results": results}
        else:
            kept = [task for task in tasks if task["id"] != value["id"]]
            self._save(request.scope, kept)
            output = {"id": value["id"], "deleted": len(kept) < len(tasks)}
        return ManagementResult(source_key=self.key, operation=request.operation.id,
                                output=output)

    def _save(self, scope, tasks):
        everything = load()
        everything[scope.user_id] = tasks
        STORE.write_text(json.dumps(everything))


class Broken(Tasks):
    async def manage(self, request):
        # records without an id, and more of them than the page may hold
        output = {"records": [{"title": "x"}] * 3, "next_cursor": None}
        return ManagementResult(source_key=self.key, operation=request.operation.id,
                                output=output)


class Plugin:
    def __init__(self, type_id, runtime, writable=True):
        kind = {"id": "task", "label": "Task", "record_schema": TASK, "readable": True,
                "writable": writable, "deletable": writable, "label_field": "title",
                "key_fields": ["title"] if writable else []}
        self.definition = define_memory_source(manifest(type_id, [kind]), lambda init: runtime(init.instance_key))

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


tasks = Plugin("tasks", Tasks)
broken = Plugin("broken", Broken, writable=False)
'''

ADA = ("--user", "ada")


def plugged(folder: Path, *, broken: bool = False) -> Path:
    """The starter profile in `folder`, plus the tasks Source (and the broken one)."""
    folder.mkdir(exist_ok=True)
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    (folder / "records_plugins.py").write_text(PLUGINS, encoding="utf-8")
    entries = '\n[[entries]]\nid = "tasks"\nuse = "records_plugins:tasks"\n'
    if broken:
        entries += '\n[[entries]]\nid = "broken"\nuse = "records_plugins:broken"\n'
    profile = folder / "mnemon.toml"
    profile.write_text(profile.read_text(encoding="utf-8") + entries, encoding="utf-8")
    return folder


def run(folder: Path, *arguments: str, stdin: str | None = None) -> Any:
    return mnemon(folder, *arguments, stdin=stdin, PYTHONPATH=str(folder))


def as_json(result: Any) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def tasks_file(folder: Path, user: str, titles: list[str]) -> Path:
    """A version 2 export of `titles` as the tasks of `user`, with one fact."""
    lines: list[dict[str, Any]] = [
        {"format": "mnemon-export", "version": 2, "scope": {"user_id": user}},
        *(
            {"source": "source:tasks", "type": "tasks", "kind": "task", "record": {"title": t}}
            for t in titles
        ),
        {"source": "source:runtime", "kind": "fact", "record": {"text": f"{user} plans."}},
    ]
    lines.append({"kind": "end", "records": len(lines) - 1})
    path = folder / f"{user}.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_a_third_party_source_is_imported_listed_exported_and_forgotten(tmp_path: Path) -> None:
    folder = plugged(tmp_path / "one")
    source = tasks_file(tmp_path, "ada", ["Buy milk", "forbidden plan", "Call Bo"])
    imported = run(folder, "import", str(source), "--yes", "--json")
    summary = json.loads(imported.stdout)
    assert imported.returncode == 1  # one task was refused: the others are in
    assert (summary["written"], summary["unchanged"], summary["refused"]) == (3, 0, 1)
    assert summary["refusals"] == [
        {"record": 2, "code": "not-allowed", "message": "title: not allowed here"}
    ]
    again = json.loads(run(folder, "import", str(source), "--yes", "--json").stdout)
    assert (again["written"], again["unchanged"]) == (0, 3)  # recognised by their key fields
    listed = as_json(run(folder, "list", *ADA, "--kind", "task", "--json"))
    assert [(i["source"], i["kind"], i["id"], i["title"]) for i in listed["items"]] == [
        ("source:tasks", "task", "t-1", "Buy milk"),
        ("source:tasks", "task", "t-2", "Call Bo"),
    ]
    shown = run(folder, "list", *ADA, "--kind", "task")
    assert "task" in shown.stdout
    assert "t-2  Call Bo" in shown.stdout
    out = tmp_path / "ada-out.jsonl"
    assert as_json(run(folder, "export", *ADA, "--out", str(out), "--json"))["records"] == 3
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {"source": "source:tasks", "type": "tasks", "kinds": ["task"]} in lines[0]["sources"]
    assert {"source": "source:tasks", "type": "tasks", "kind": "task",
            "record": {"id": "t-2", "title": "Call Bo", "done": False}} in lines  # fmt: skip
    # into another profile that mounts the same Source: the tasks arrive once
    fresh = plugged(tmp_path / "two")
    moved = as_json(run(fresh, "import", str(out), "--user", "cy", "--yes", "--json"))
    assert (moved["written"], moved["refused"]) == (3, 0)
    titles = [i["title"] for i in as_json(run(fresh, "list", "--user", "cy", "--json"))["items"]
              if i["kind"] == "task"]  # fmt: skip
    assert titles == ["Buy milk", "Call Bo"]
    gone = as_json(run(folder, "forget", "t-1", *ADA, "--kind", "task", "--yes", "--json"))
    assert gone == {"source_key": "source:tasks", "kind": "task", "id": "t-1", "forgotten": True}
    left = as_json(run(folder, "list", *ADA, "--kind", "task", "--json"))["items"]
    assert [item["id"] for item in left] == ["t-2"]
    missing = run(folder, "forget", "t-1", *ADA, "--kind", "task", "--yes", "--json")
    assert json.loads(missing.stdout)["error"]["code"] == "not-found"


def test_a_source_answering_outside_the_records_shape_is_skipped_never_a_crash(
    tmp_path: Path,
) -> None:
    folder = plugged(tmp_path, broken=True)
    listed = as_json(run(folder, "list", *ADA, "--json"))
    (skipped,) = [item for item in listed["skipped"] if item["source_key"] == "source:broken"]
    assert skipped["reason"].startswith("contract: ")
    assert "records[0] has no string id" in skipped["reason"]
    unknown = run(folder, "list", *ADA, "--kind", "chore", "--json")
    assert json.loads(unknown.stdout)["error"]["code"] == "unknown-kind"
    # a file naming a kind no mounted Source takes is refused before anything is written
    path = tmp_path / "chores.jsonl"
    header = {"format": "mnemon-export", "version": 2, "scope": {"user_id": "ada"}}
    chore = {"source": "source:chores", "kind": "chore", "record": {"title": "Sweep"}}
    end = {"kind": "end", "records": 1}
    path.write_text("\n".join(json.dumps(line) for line in (header, chore, end)) + "\n")
    refused = run(folder, "import", str(path), "--yes", "--json")
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "unknown-source"
    assert "no mounted Source takes chore records: nothing was imported" in error["message"]


def _kind(**changes: Any) -> dict[str, Any]:
    kind = {
        "id": "task",
        "label": "Task",
        "record_schema": {"type": "object", "properties": {"id": {}, "title": {}}},
        "readable": True,
        "writable": True,
        "key_fields": ["title"],
    }
    return {**kind, **changes}


@pytest.mark.parametrize(
    ("records", "operations", "message"),
    [
        ([_kind(readable=False, writable=False)], [], "readable, writable or deletable"),
        ([_kind(record_schema={"type": "object", "properties": {"title": {}}})], [], "have an id"),
        ([_kind(key_fields=[])], [], "key_fields: a writable kind names"),
        ([_kind(group_field="space")], [], "group_field: 'space' is not a property"),
        ([_kind(id="end")], [], "'end' names the last line of an export"),
        ([_kind(), _kind()], [], "records: duplicate record kind"),
        ([_kind(record_schema={"type": "array"})], [], 'must declare "type": "object"'),
        ([], [{"id": "records-read", "kind": "read", "description": "Mine.",
               "input_schema": {"type": "object"}}], "is the core's record operation"),
    ],
    ids=["does-nothing", "no-id", "no-key-fields", "unknown-group", "end", "duplicate",
         "not-an-object", "reserved-operation"],
)  # fmt: skip
def test_a_record_declaration_is_checked_when_the_source_is_defined(
    records: list[dict[str, Any]], operations: list[dict[str, Any]], message: str
) -> None:
    manifest = {
        "type_id": "tasks",
        "package_name": "acme-tasks",
        "role": "tasks",
        "capabilities": ["project"],
        "consistency": "exact-snapshot",
        "management": {
            "label": "Tasks",
            "description": "Tasks.",
            "operations": operations,
            "records": records,
        },
    }
    with pytest.raises(DefinitionError, match="management") as raised:
        define_memory_source(manifest, lambda init: None)
    assert message in str(raised.value)


def test_record_operations_are_made_once_per_descriptor_and_follow_a_changed_copy() -> None:
    from mnemon._models import ManagementDescriptor

    descriptor = ManagementDescriptor.model_validate(
        {"label": "Tasks", "description": "Tasks.", "records": [_kind()]}
    )
    first = descriptor.record_operations()
    assert descriptor.record_operations() is first  # the schemas keep their identity
    assert [op.id for op in first] == ["records-read", "records-write"]
    changed = descriptor.model_copy(update={"records": (_kind(deletable=True),)})
    assert [op.id for op in changed.record_operations()] == [
        "records-read",
        "records-write",
        "records-delete",
    ]
    assert descriptor.record_operations() is first


def test_an_import_sets_start_up_objects_aside_from_the_collector_and_puts_them_back(
    tmp_path: Path,
) -> None:
    import gc

    from mnemon._cli._transfer import _long_lived_frozen

    def fail_while_frozen() -> None:
        with _long_lived_frozen():
            assert gc.get_freeze_count() > 0
            raise RuntimeError

    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError):
        fail_while_frozen()
    assert gc.get_freeze_count() == 0
    folder = plugged(tmp_path / "one")
    source = tasks_file(tmp_path, "ada", ["Buy milk", "Call Bo"])
    summary = json.loads(run(folder, "import", str(source), "--yes", "--json").stdout)
    assert (summary["written"], summary["refused"]) == (summary["records"], 0)
    assert gc.get_freeze_count() == 0  # a command run in this process leaves nothing frozen


@given(st.lists(st.one_of(st.text(), st.integers(), st.none()), max_size=4))
def test_content_keys_are_written_as_the_json_encoder_writes_them(values: list[Any]) -> None:
    # keys of earlier imports must not change: the shortcut writes the encoder's very text
    from mnemon._cli._records import _json_list, _json_text

    assert _json_list(values) == _json_text(values)
    strings = [value for value in values if isinstance(value, str)]
    assert _json_list(strings) == _json_text(strings)
