"""The `mnemon` command as a person's tool: JSON everywhere, diagnostics, recall, completion."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_cli import mnemon

PLUGINS = '''\
"""Third-party plugins for the command's tests: a to-do Source, a Source whose facts() fail."""

from mnemon.sdk import define_memory_source, install_memory
from mnemon_testing import StubSource

todo = StubSource("todo", type_id="todo", routes=["lookup"], actions=["add"],
                  items=[("t-1", "buy oat milk")])


class _Failing:
    def __init__(self, key):
        self.key = key

    async def facts(self, request):
        raise RuntimeError("facts exploded: tok_SECRET_detail")

    async def project(self, request):
        raise RuntimeError("never")


class _FailingPlugin:
    definition = define_memory_source(StubSource(type_id="failing").manifest, lambda init: _Failing(init.instance_key))

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


failing = _FailingPlugin()
'''


def third_party(folder: Path) -> Path:
    """The starter profile in `folder`, plus the to-do and the failing Source."""
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    (folder / "cli_manager_plugins.py").write_text(PLUGINS, encoding="utf-8")
    profile = folder / "mnemon.toml"
    profile.write_text(
        profile.read_text(encoding="utf-8")
        + '\n[[entries]]\nid = "todo"\nuse = "cli_manager_plugins:todo"\n'
        + '\n[[entries]]\nid = "failing"\nuse = "cli_manager_plugins:failing"\n',
        encoding="utf-8",
    )
    return folder


@pytest.fixture(scope="module")
def plugged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return third_party(tmp_path_factory.mktemp("plugged"))


def run(
    folder: Path, *arguments: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return mnemon(folder, *arguments, stdin=stdin, PYTHONPATH=str(folder))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("manager")
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    for index in range(12):
        stored = mnemon(folder, "remember", f"Tea note number {index}.", "--user", "ada", "--yes")
        assert stored.returncode == 0, stored.stderr
    return folder


# ------------------------------------------------------------------ the command line itself


def test_help_version_and_completion(project: Path) -> None:
    short = mnemon(project, "-h")
    assert short.returncode == 0
    assert "recall" in short.stdout
    assert "completion" in short.stdout
    version = mnemon(project, "--version")
    assert version.returncode == 0
    assert version.stdout.startswith("mnemon, version ")
    for shell, marker in (("bash", "complete -o"), ("zsh", "compdef"), ("fish", "complete ")):
        script = mnemon(project, "completion", shell)
        assert script.returncode == 0, script.stderr
        assert "_MNEMON_COMPLETE" in script.stdout
        assert marker in script.stdout
    # the script works: click answers a completion request for the subcommands
    offered = mnemon(
        project, COMP_WORDS="mnemon rec", COMP_CWORD="1", _MNEMON_COMPLETE="bash_complete"
    )
    assert "recall" in offered.stdout


@pytest.mark.parametrize(
    ("arguments", "code", "status"),
    [
        (("recall", "tea", "--json"), "no-route", 1),
        (("recall", "tea", "--user", "ada", "--limit", "0", "--json"), "usage", 2),
        (("recall", "--json"), "usage", 2),
        (("view", "--user", "a\tb", "--json"), "invalid-flag", 2),
        (("remember", "x", "--user", "ada", "--json"), "not-confirmed", 1),
        (("no-such-command", "--json"), "usage", 2),
        (("init", "--json"), "exists", 1),
    ],
    ids=["diagnosed", "bad-limit", "missing-argument", "bad-flag", "not-confirmed", "unknown-command", "exists"],
)  # fmt: skip
def test_errors_under_json_are_json(
    project: Path, arguments: tuple[str, ...], code: str, status: int
) -> None:
    result = mnemon(project, *arguments, stdin="n\n")
    assert result.returncode == status
    error = json.loads(result.stdout)["error"]
    assert error["code"] == code
    assert error["exit_code"] == status
    assert error["message"]


def test_every_command_accepts_json() -> None:
    import click

    from mnemon._cli._commands import cli

    def walk(
        command: click.Command, path: tuple[str, ...]
    ) -> list[tuple[tuple[str, ...], click.Command]]:
        if isinstance(command, click.Group):
            return [
                found
                for name, sub in command.commands.items()
                for found in walk(sub, (*path, name))
            ]
        return [(path, command)]

    commands = walk(cli, ())
    assert (("recall",), cli.commands["recall"]) in commands
    for path, command in commands:
        if path in (("mcp",), ("plugin",)):
            # mnemon-mcp's server and mnemon-remote's runner: their flags are parsed there
            continue
        flags = {flag for param in command.params for flag in param.opts}
        assert "--json" in flags, path


def test_debug_shows_the_log_of_mnemon_with_a_failing_sources_traceback(plugged: Path) -> None:
    quiet = run(plugged, "view", "--user", "ada")
    assert quiet.returncode == 0, quiet.stderr
    assert "source-facts-failed: Memory Source source:failing facts() failed" in quiet.stdout
    assert "Traceback" not in quiet.stderr
    assert "tok_SECRET_detail" not in quiet.stdout + quiet.stderr
    loud = run(plugged, "--debug", "view", "--user", "ada")
    assert loud.returncode == 0, loud.stderr
    assert "DEBUG mnemon.reads: Memory Source source:failing facts() failure" in loud.stderr
    assert "Traceback" in loud.stderr
    assert "RuntimeError: facts exploded" in loud.stderr


# ------------------------------------------------------------------ profiles


def test_the_profile_is_found_in_a_parent_folder(project: Path) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True, exist_ok=True)
    found = mnemon(deep, "recall", "tea", "--user", "ada", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["items"]


def test_hints_keep_the_profile_flag(tmp_path: Path) -> None:
    wrote = mnemon(tmp_path, "-p", "conf/memory.toml", "init")
    assert wrote.returncode == 0, wrote.stderr
    assert "next: mnemon -p conf/memory.toml view" in wrote.stdout
    plain = mnemon(tmp_path / "conf", "init", "--force")
    assert "next: mnemon view" in plain.stdout
    missing = mnemon(tmp_path, "-p", "other/memory.toml", "view")
    assert "create one with `mnemon -p other/memory.toml init`" in missing.stderr


def test_an_unknown_strategy_lists_the_installed_ones(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init").returncode == 0
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        profile.read_text(encoding="utf-8").replace('use = "layered"', 'use = "layerd"'),
        encoding="utf-8",
    )
    result = mnemon(tmp_path, "view", "--user", "ada")
    assert result.returncode == 1
    assert "[strategy] use 'layerd' selects no mounted Strategy: did you mean 'layered'?" in (
        result.stderr
    )
    assert "(mounted: layered; installed Strategy plugins: " in result.stderr
    # the plugins whose manifests declare a Strategy, never the Sources or extensions
    listed = result.stderr.split("installed Strategy plugins: ")[1]
    assert "layered" in listed
    assert "general" in listed
    assert "runtime" not in listed
    assert "scoped" not in listed


def test_strategy_selects_a_mounted_strategy_and_never_mounts_one(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        '[strategy]\nuse = "layered"\n\n[[entries]]\nid = "runtime"\nplugin = "runtime"\n',
        encoding="utf-8",
    )
    result = mnemon(tmp_path, "view", "--user", "ada", "--json")
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "missing-strategy"
    assert "[strategy] use 'layered' selects no mounted Strategy" in error["message"]
    assert 'add an entry id = "layered", plugin = "layered"' in error["message"]
    listed = json.loads(mnemon(tmp_path, "plugins", "--json").stdout)["plugins"]
    assert {row["id"]: row["status"] for row in listed}["layered"] == "available"
    with profile.open("a", encoding="utf-8") as file:
        file.write('\n[[entries]]\nid = "layered"\nplugin = "layered"\n')
    served = mnemon(tmp_path, "view", "--user", "ada", "--json")
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["strategy_type_id"] == "layered"


# ------------------------------------------------------------------ recall: a person's read


def test_recall_honours_a_limit_above_the_turn_policy(project: Path) -> None:
    # the layered Strategy lets the model see 4 results on a first recall; a person asked for 10
    found = json.loads(
        mnemon(project, "recall", "tea", "--user", "ada", "--limit", "10", "--json").stdout
    )
    assert len(found["items"]) == 10
    assert found["truncated"] is True  # 12 matched
    everything = json.loads(
        mnemon(project, "recall", "tea", "--user", "ada", "--limit", "12", "--json").stdout
    )
    assert len(everything["items"]) == 12
    assert everything["truncated"] is False


def test_recall_beyond_the_routes_maximum_names_it(project: Path) -> None:
    result = mnemon(project, "recall", "tea", "--user", "ada", "--limit", "21")
    assert result.returncode == 2
    assert "--limit: at most 20 for source:spaces/recall (the route's maximum)" in result.stderr
    # the model is told the same number: the recall tool's `limit` stops where the route does
    wake = mnemon(project, "view", "--user", "ada").stdout
    recall = next(line for line in wake.splitlines() if '"id":"source:spaces/recall"' in line)
    assert '"limit":{"maximum":20,' in recall


def test_recall_says_why_there_is_no_route(project: Path) -> None:
    result = mnemon(project, "recall", "tea")
    assert result.returncode == 1
    assert "is spaces mounted?" not in result.stderr
    assert "source:spaces is unavailable (missing-scope) (add --user)" in result.stderr


def test_view_with_a_query_includes_its_results_in_json(project: Path) -> None:
    view = json.loads(mnemon(project, "view", "tea", "--user", "ada", "--json").stdout)
    assert view["id"].startswith("view:")
    (recall,) = [e for e in view["evidence"] if e["route_id"] == "source:spaces/recall"]
    assert recall["items"][0]["text"].startswith("Tea note number")


# ------------------------------------------------------------------ inspect: health per scope


def test_inspect_reports_each_sources_health_for_a_scope(project: Path) -> None:
    bare = json.loads(mnemon(project, "inspect", "--json").stdout)
    health = {item["source_key"]: item for item in bare["health"]}
    assert health["source:spaces"]["health"] == "unavailable"
    assert "(add --user)" in health["source:spaces"]["diagnostics"][0]
    assert "(add --workspace)" in health["source:documents"]["diagnostics"][0]
    scoped = json.loads(
        mnemon(project, "inspect", "--user", "ada", "--workspace", "w", "--json").stdout
    )
    assert {item["source_key"]: item["health"] for item in scoped["health"]} == {
        "source:documents": "ready",
        "source:runtime": "ready",
        "source:spaces": "ready",
    }
    text = mnemon(project, "inspect", "--user", "ada")
    assert "health for scope: user_id=ada" in text.stdout
    assert "source:documents  unavailable" in text.stdout


DESKS = '''\
"""A third-party Source that needs a workspace, or the scope ids its configuration names."""

from mnemon.sdk import SourceFacts, ViewContribution, define_memory_source, install_memory

MANIFEST = {
    "type_id": "desk",
    "package_name": "cli-desk-plugins",
    "role": "working-context",
    "capabilities": ["project"],
    "consistency": "exact-snapshot",
    "partition_keys": ["workspace"],
}


class _Desk:
    def __init__(self, init):
        self._key = init.instance_key
        needs = init.configuration.get("needs")
        if needs is not None:
            self.partition_keys = needs  # what this instance needs, chosen by its configuration
        self._needs = needs or MANIFEST["partition_keys"]

    async def facts(self, request):
        missing = any(getattr(request.scope, name) is None for name in self._needs)
        return SourceFacts(
            instance_key=self._key, type_id="desk", role="working-context",
            availability="unavailable" if missing else "ready",
            reason="missing-scope" if missing else None,
            capabilities=() if missing else ("project",),
        )

    async def project(self, request):
        return ViewContribution()


class _Plugin:
    definition = define_memory_source(MANIFEST, _Desk)

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


desk = _Plugin()
'''


def test_a_missing_scope_hint_names_the_ids_a_source_declares(tmp_path: Path) -> None:
    """The flag to add comes from what each Source declares, never from its type."""
    assert mnemon(tmp_path, "init", "--embedder", "none").returncode == 0
    (tmp_path / "cli_desk_plugins.py").write_text(DESKS, encoding="utf-8")
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        profile.read_text(encoding="utf-8")
        + '\n[[entries]]\nid = "desk"\nuse = "cli_desk_plugins:desk"\n'
        + '\n[[entries]]\nid = "crew"\nuse = "cli_desk_plugins:desk"\n'
        + '[entries.config]\nneeds = ["agent_id", "session_id"]\n'
        # the runtime Source configured to need a workspace too: its instance says so
        + '\n[[entries]]\nid = "team"\nplugin = "runtime"\n'
        + '[entries.config]\nscope_keys = ["workspace", "user_id"]\n',
        encoding="utf-8",
    )
    report = json.loads(run(tmp_path, "inspect", "--user", "ada", "--json").stdout)
    health = {item["source_key"]: item for item in report["health"]}
    assert health["source:desk"]["health"] == "unavailable"
    assert health["source:desk"]["diagnostics"][0].endswith("(add --workspace)")
    assert health["source:crew"]["diagnostics"][0].endswith("(add --agent and --session)")
    assert health["source:team"]["diagnostics"][0].endswith("(add --workspace)")
    assert health["source:runtime"]["health"] == "ready"
    shown = run(tmp_path, "view", "--agent", "a1")
    assert shown.returncode == 0, shown.stderr
    assert "source:desk is unavailable (missing-scope) (add --workspace)" in shown.stdout
    assert "(add --session)" in shown.stdout  # crew: the agent is given, the session is not
    given = json.loads(
        run(tmp_path, "inspect", "--user", "ada", "--workspace", "w", "--json").stdout
    )
    states = {item["source_key"]: item["health"] for item in given["health"]}
    assert (states["source:desk"], states["source:team"]) == ("ready", "ready")


def test_a_damaged_store_names_its_folder_and_the_os_error(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init").returncode == 0
    assert mnemon(tmp_path, "remember", "Kept.", "--user", "ada", "--yes").returncode == 0
    store = tmp_path / ".mnemon" / "sources" / "spaces" / "spaces" / "spaces.sqlite3"
    assert store.is_file()
    store.write_bytes(b"this is not a database" * 100)
    result = mnemon(tmp_path, "recall", "kept", "--user", "ada")
    assert result.returncode == 1
    assert "source:spaces is unavailable" in result.stderr
    assert "store folder .mnemon/sources/spaces/spaces" in result.stderr
    assert str(tmp_path) not in result.stderr


def test_a_third_party_source_of_its_own_role_is_seen_by_the_model(plugged: Path) -> None:
    # the to-do Source's role is `notes`, none of the layered Strategy's three: still admitted
    view = json.loads(run(plugged, "view", "--user", "ada", "--json").stdout)
    assert "source:todo/lookup" in {route["id"] for route in view["routes"]}
    assert "source:todo/add" in {offer["id"] for offer in view["offers"]}
    assert not [d for d in view["diagnostics"] if d["code"] == "source-not-selected"]


def test_a_source_the_strategy_leaves_out_is_diagnosed(tmp_path: Path) -> None:
    third_party(tmp_path)
    # the starter's scoped extension, switched on with a selection that leaves the to-do out
    profile = tmp_path / "mnemon.toml"
    disabled = 'id = "scoped"\nplugin = "scoped"\nenabled = false\n'
    assert disabled in profile.read_text(encoding="utf-8")
    profile.write_text(
        profile.read_text(encoding="utf-8").replace(
            disabled,
            'id = "scoped"\nplugin = "scoped"\n[entries.config]\n'
            'source_keys = ["source:runtime", "source:spaces"]\n',
        ),
        encoding="utf-8",
    )
    view = json.loads(run(tmp_path, "view", "--user", "ada", "--json").stdout)
    (left_out,) = [
        d for d in view["diagnostics"]
        if d["code"] == "source-not-selected" and d["key"] == "source:todo"
    ]  # fmt: skip
    assert left_out["message"].endswith("(excluded-by-selection)")
    shown = run(tmp_path, "inspect", "--user", "ada")
    assert "source:todo       serving, not selected by the Strategy" in shown.stdout


def test_plugins_prints_a_header_over_its_columns(tmp_path: Path) -> None:
    (tmp_path / "mnemon.toml").write_text(
        '[strategy]\nuse = "layered"\n\n[[entries]]\nid = "layered"\nplugin = "layered"\n',
        encoding="utf-8",
    )
    lines = mnemon(tmp_path, "plugins").stdout.splitlines()
    assert lines[0].split() == ["ID", "VERSION", "STATUS", "ORIGIN", "LOCATION"]
    layered = next(line for line in lines if line.startswith("layered "))
    # each value starts where its heading does
    for heading, value in zip(lines[0].split()[:4], layered.split()[:4], strict=True):
        assert lines[0].index(heading) == layered.index(value), heading
    assert layered.split()[2] == "active"


REVOKED = """\
from mnemon.sdk import SourceFacts, define_memory_source, install_memory
from mnemon_testing import StubSource

MANIFEST = StubSource(type_id="keyed").manifest


class _Revoked:
    def __init__(self, key):
        self.key = key

    async def facts(self, request):
        return SourceFacts(instance_key=self.key, type_id="keyed", role="notes",
                           availability="unavailable", reason="provider-access-revoked",
                           capabilities=tuple(MANIFEST["capabilities"]))

    async def project(self, request):
        raise RuntimeError("never: the Source is unavailable")


class _Plugin:
    definition = define_memory_source(MANIFEST, lambda init: _Revoked(init.instance_key))

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


keyed = _Plugin()
"""


def test_a_source_refused_its_key_is_not_sent_to_its_store_folder(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init", "--embedder", "none").returncode == 0
    (tmp_path / "revoked_plugin.py").write_text(REVOKED, encoding="utf-8")
    with (tmp_path / "mnemon.toml").open("a", encoding="utf-8") as profile:
        profile.write('\n[[entries]]\nid = "keyed"\nuse = "revoked_plugin:keyed"\n')
    # its folder exists: only the reason tells a credential from a disk problem
    (tmp_path / ".mnemon" / "sources" / "keyed" / "keyed").mkdir(parents=True)
    shown = run(tmp_path, "inspect", "--user", "ada")
    line = next(line for line in shown.stdout.splitlines() if "source:keyed is unavailable" in line)
    assert "(provider-access-revoked)" in line
    assert "store folder" not in shown.stdout
    listed = json.loads(run(tmp_path, "view", "--user", "ada", "--json").stdout)["diagnostics"]
    assert {"key": "source:keyed", "reason": "provider-access-revoked"}.items() <= next(
        item for item in listed if item["key"] == "source:keyed"
    ).items()
