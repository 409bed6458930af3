"""Raven backends written from Raven's contract alone (`foreign/`), run as their authors wrote them.

They import `raven.*`, which mnemon stands in for; they are found as drop-in folders, or as a
pip package of Raven's `raven.plugins` group; and their failures (a factory that raises, a
dependency that is missing) leave only that backend unavailable.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mnemon_source_raven as raven
import pytest
from click.testing import CliRunner

from mnemon import MemoryHost, discover_plugins, load_profile
from mnemon._cli._commands import cli
from mnemon_testing import MemoryCompositionRunner, SelectAll, StubSource

FOREIGN = Path(__file__).parent / "foreign"
ADA = {"user_id": "ada", "tenant_id": "acme", "session_id": "s-1"}
BOB = {"user_id": "bob", "tenant_id": "acme", "session_id": "s-2"}


def allow(offer: object) -> bool:
    return True


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose `.mnemon/plugins/` holds the foreign plugins, and an empty user folder."""
    monkeypatch.setenv("MNEMON_HOME", str(tmp_path / "home"))
    plugins = tmp_path / ".mnemon" / "plugins"
    for folder in ("jsonl-memory", "needs-dependency", "fragile-memory"):
        shutil.copytree(FOREIGN / folder, plugins / folder)
    return tmp_path


@pytest.fixture
def raven_modules() -> Iterator[None]:
    """Put `raven.*` in `sys.modules` back as it was (a test may remove or replace it)."""
    kept = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "raven"}
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "raven"]:
        del sys.modules[name]
    sys.modules.update(kept)


def written_files(root: Path, name: str) -> list[Any]:
    rows = []
    for path in sorted(root.rglob(name)):
        rows.extend(json.loads(line) for line in path.read_text("utf-8").splitlines())
    return rows


async def runner_for(project: Path, **entry: Any) -> tuple[MemoryCompositionRunner, SelectAll]:
    strategy = SelectAll()
    runner = MemoryCompositionRunner(config_dir=project, data_dir=project / "data")
    await runner.mount(raven, instance_id="memory", config=entry)
    await runner.mount(StubSource(text="other memory"), instance_id="other")
    await runner.mount(strategy, instance_id="all", config={"required": False})
    return runner, strategy


async def test_a_foreign_backend_serves_each_identity_its_own_memory(project: Path) -> None:
    # Raven's own identity example: a static user_id in the plugin's config; the scope's wins
    entry = {"backend": "jsonl", "backend_config": {"user_id": "user-raven"}}
    runner, _ = await runner_for(project, **entry)
    async with runner:
        turn = await runner.begin_turn({"scope": ADA})
        assert [r.id for r in turn.view.routes] == ["source:memory/recall"]
        assert {o.action_id for o in turn.view.offers} >= {"store", "feedback"}
        receipt = await turn.execute_action(
            "source:memory/store",
            {"messages": [{"role": "user", "content": "Ada keeps the vault code in the safe"}]},
            allow,
        )
        await turn.release()
        turn = await runner.begin_turn({"scope": BOB})
        await turn.execute_action(
            "source:memory/store",
            {"messages": [{"role": "user", "content": "Bob keeps the bike code in a drawer"}]},
            allow,
        )
        await turn.release()
        found = {}
        for name, scope in (
            ("ada", ADA),
            ("bob", BOB),
            ("ada-elsewhere", {"user_id": "ada", "tenant_id": "globex"}),
            ("ada-no-tenant", {"user_id": "ada"}),
        ):
            turn = await runner.begin_turn({"scope": scope})
            evidence = await turn.execute_route("source:memory/recall", {"query": "code"})
            found[name] = [item.text for item in evidence.items]
            if name == "ada":
                feedback = await turn.execute_action(
                    "source:memory/feedback",
                    {"items": [{"memory_id": evidence.items[0].id, "helpful": True}]},
                    allow,
                )
            await turn.release()
    assert receipt.completion == "accepted"
    assert found == {
        "ada": ["Ada keeps the vault code in the safe"],
        "bob": ["Bob keeps the bike code in a drawer"],
        "ada-elsewhere": [],
        "ada-no-tenant": [],
    }
    # the backend wrote each message under the identity its ctx.config named
    stored = written_files(project / "data", "memories.jsonl")
    assert sorted((row["owner"], row["session"]) for row in stored) == [
        (["user", "ada"], "s-1"),
        (["user", "bob"], "s-2"),
    ]
    assert feedback.completion == "accepted"
    assert written_files(project / "data", "feedback.jsonl") == [
        {
            "type": "memory_usage",
            "items": [{"memory_id": "jl-0", "helpful": True}],
            "user_id": "ada",
        }
    ]
    # it imported Raven's modules: mnemon's stand-ins, as Raven is not installed here
    assert getattr(sys.modules["raven.memory_engine"], "__mnemon_shim__", False)


async def test_the_agent_track_reads_what_the_agent_said(project: Path) -> None:
    runner, _ = await runner_for(project, backend="jsonl", track="agent")
    scope = {"user_id": "ada", "agent_id": "planner"}
    async with runner:
        turn = await runner.begin_turn({"scope": scope})
        await turn.execute_action(
            "source:memory/store",
            {
                "messages": [
                    {"role": "user", "content": "book a meeting room"},
                    {"role": "assistant", "content": "Booked meeting room 3 for Friday"},
                ]
            },
            allow,
        )
        await turn.release()
        turn = await runner.begin_turn({"scope": {"agent_id": "planner", "user_id": "ada"}})
        evidence = await turn.execute_route("source:memory/recall", {"query": "meeting room"})
        await turn.release()
    assert [item.text for item in evidence.items] == ["Booked meeting room 3 for Friday"]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"backend": "fragile"}, "backend-factory-failed"),
        ({"backend": "vector"}, "backend-import-failed"),
    ],
    ids=["factory-raises", "dependency-missing"],
)
async def test_a_backend_that_cannot_be_made_is_unavailable_and_the_rest_serves(
    project: Path, caplog: pytest.LogCaptureFixture, entry: dict[str, Any], reason: str
) -> None:
    runner, strategy = await runner_for(project, **entry)
    async with runner:
        turn = await runner.begin_turn({"scope": ADA})
        served = [c.source_key for c in turn.view.consistency]
        await turn.release()
    assert served == ["source:other"]
    assert ("unavailable", reason) in {
        (c.facts.availability, c.facts.reason) for c in strategy.seen
    }
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "plugins.config" not in logged  # the factory's own message is never shown


async def test_a_factory_given_what_it_needs_serves(project: Path) -> None:
    entry = {"backend": "fragile", "backend_config": {"endpoint": "http://127.0.0.1:9"}}
    runner, _ = await runner_for(project, **entry)
    async with runner:
        turn = await runner.begin_turn({"scope": ADA})
        served = [c.source_key for c in turn.view.consistency]
        await turn.release()
    assert served == ["source:memory", "source:other"]


async def test_an_unavailable_backend_with_reject_rejects_the_turn_that_needs_it(
    project: Path,
) -> None:
    runner = MemoryCompositionRunner(config_dir=project, data_dir=project / "data")
    await runner.mount(
        raven, instance_id="memory", config={"backend": "vector", "on_failure": "reject"}
    )
    await runner.mount(SelectAll(), instance_id="all", config={"required": True})
    async with runner:
        with pytest.raises(Exception, match="memory"):
            await runner.begin_turn({"scope": ADA})


PROFILE = textwrap.dedent(
    """
    [strategy]
    use = "general"

    [[entries]]
    id = "general"
    plugin = "general"

    [[entries]]
    id = "memory"
    plugin = "raven"
    config = { backend = "jsonl" }

    [[entries]]
    id = "fragile"
    plugin = "raven"
    config = { backend = "fragile" }

    [[entries]]
    id = "vector"
    use = "mnemon_source_raven"
    config = { backend = "vector" }

    [[entries]]
    id = "runtime"
    plugin = "runtime"
    """
)


def plugins_listed(project: Path) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["--profile", str(project / "mnemon.toml"), "plugins", "--json"]
    )
    assert result.exit_code == 0, result.output
    return {row["id"]: row for row in json.loads(result.output)["plugins"]}


def test_mnemon_plugins_lists_a_raven_plugin_whose_backend_an_entry_uses_active(
    project: Path,
) -> None:
    (project / "mnemon.toml").write_text(PROFILE, encoding="utf-8")
    rows = plugins_listed(project)
    assert {name: rows[name]["status"] for name in ("jsonl-memory", "fragile-memory")} == {
        "jsonl-memory": "active",
        "fragile-memory": "active",
    }
    assert rows["vector-memory"]["status"] == "active"  # named through `use`, just the same
    assert rows["jsonl-memory"]["location"] == ".mnemon/plugins/jsonl-memory/raven-plugin.toml"
    assert (rows["raven"]["status"], rows["raven"]["origin"]) == ("active", "bundled")
    # a disabled entry leaves its backend's plugin disabled; none names it: available
    (project / "mnemon.toml").write_text(
        PROFILE.replace(
            'config = { backend = "jsonl" }', 'enabled = false\nconfig = { backend = "jsonl" }'
        ).replace('config = { backend = "vector" }', 'config = { backend = "fragile" }'),
        encoding="utf-8",
    )
    rows = plugins_listed(project)
    assert rows["jsonl-memory"]["status"] == "disabled"
    assert rows["vector-memory"]["status"] == "available"


async def test_a_profile_with_broken_backends_boots_and_serves_the_rest(project: Path) -> None:
    (project / "mnemon.toml").write_text(PROFILE, encoding="utf-8")
    async with load_profile(project / "mnemon.toml").open_host() as host:
        async with host.turn(scope=ADA) as turn:
            routes = {route.id for route in turn.view.routes}
            receipt = await turn.execute_action(
                "source:memory/store",
                {"messages": [{"role": "user", "content": "Ada likes green tea"}]},
                allow,
            )
        async with host.turn(scope=ADA) as turn:
            evidence = await turn.execute_route("source:memory/recall", {"query": "green tea"})
    assert "source:memory/recall" in routes
    assert not routes & {"source:fragile/recall", "source:vector/recall"}
    assert receipt.completion == "accepted"
    assert [item.text for item in evidence.items] == ["Ada likes green tea"]


def test_mnemon_view_boots_a_profile_with_broken_backends(project: Path) -> None:
    (project / "mnemon.toml").write_text(PROFILE, encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["--profile", str(project / "mnemon.toml"), "view", "--user", "ada", "--json"]
    )
    assert result.exit_code == 0, result.output
    view = json.loads(result.output)
    routes = {route["id"] for route in view["routes"]}
    assert "source:memory/recall" in routes
    assert "source:vector/recall" not in routes  # declared (its tool keeps a name), not offered
    assert "fragile-memory needs" not in json.dumps(view)  # the factory's text never reaches it


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The jsonl plugin installed as pip installs it: a `raven.plugins` entry point."""
    site = tmp_path / "site"
    shutil.copytree(FOREIGN / "jsonl-memory" / "raven_jsonl", site / "raven_jsonl")
    shutil.copy(FOREIGN / "jsonl-memory" / "raven-plugin.toml", site / "raven_jsonl")
    info = site / "raven_jsonl-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: raven-jsonl\nVersion: 1.0.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("[raven.plugins]\njsonl = raven_jsonl\n", "utf-8")
    (info / "RECORD").write_text(
        "raven_jsonl/__init__.py,,\nraven_jsonl/backend.py,,\nraven_jsonl/raven-plugin.toml,,\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("MNEMON_HOME", str(tmp_path / "home"))
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in [name for name in sys.modules if name.split(".")[0] == "raven_jsonl"]:
        del sys.modules[name]


async def test_a_pip_installed_raven_plugin_is_found_in_ravens_group_and_serves(
    tmp_path: Path, installed: Path
) -> None:
    found = discover_plugins(project_dir=tmp_path).get("jsonl-memory")
    assert found is not None
    assert (found.origin, found.status, found.distribution) == (
        "entry-point",
        "available",
        "raven-jsonl",
    )
    assert "raven_jsonl.backend" not in sys.modules  # found without importing the backend
    async with MemoryHost(data_dir=tmp_path / "data", config_dir=tmp_path) as host:
        await host.mount(raven, instance_id="memory", config={"backend": "jsonl"})
        await host.mount(SelectAll(), instance_id="all", config={"required": True})
        async with host.turn(scope=ADA) as turn:
            await turn.execute_action(
                "source:memory/store",
                {"messages": [{"role": "user", "content": "Ada takes the train"}]},
                allow,
            )
        async with host.turn(scope=ADA) as turn:
            evidence = await turn.execute_route("source:memory/recall", {"query": "train"})
    assert [item.text for item in evidence.items] == ["Ada takes the train"]
    assert "raven_jsonl.backend" in sys.modules  # imported when the entry was built


REAL_RAVEN = {
    "raven/__init__.py": "",
    "raven/memory_engine/__init__.py": "from raven.memory_engine.backend import Memory\n",
    "raven/memory_engine/backend.py": textwrap.dedent(
        """
        from dataclasses import dataclass, field
        from typing import Any, Protocol

        @dataclass(frozen=True)
        class Memory:
            text: str
            score: float = 0.0
            metadata: dict[str, Any] = field(default_factory=dict)

        class MemoryBackend(Protocol):
            pass
        """
    ),
    "raven/plugin/__init__.py": "class PluginContext:\n    pass\n",
}


async def test_the_real_raven_wins_over_the_stand_ins_and_its_memory_is_taken(
    project: Path, tmp_path: Path, raven_modules: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "real"
    for relative, body in REAL_RAVEN.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(body, encoding="utf-8")
    for name in [name for name in sys.modules if name.split(".")[0] == "raven"]:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(site))
    assert raven.install_raven_shim() is False  # Raven is installed: nothing is registered
    runner, _ = await runner_for(project, backend="jsonl")
    async with runner:
        turn = await runner.begin_turn({"scope": ADA})
        await turn.execute_action(
            "source:memory/store",
            {"messages": [{"role": "user", "content": "Ada reads on the train"}]},
            allow,
        )
        evidence = await turn.execute_route("source:memory/recall", {"query": "train"})
        await turn.release()
    assert not getattr(sys.modules["raven"], "__mnemon_shim__", False)
    # the backend built Raven's own Memory objects, and the Source took them
    assert sys.modules["raven.memory_engine"].Memory is not raven.Memory
    assert [item.text for item in evidence.items] == ["Ada reads on the train"]


async def test_without_the_stand_ins_a_backend_importing_raven_is_unavailable(
    project: Path, raven_modules: None
) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "raven"]:
        del sys.modules[name]
    runner, strategy = await runner_for(project, backend="jsonl", raven_shim=False)
    async with runner:
        turn = await runner.begin_turn({"scope": ADA})
        await turn.release()
    assert ("unavailable", "backend-import-failed") in {
        (c.facts.availability, c.facts.reason) for c in strategy.seen
    }
    assert "raven" not in sys.modules
    # the stand-ins make the same modules importable, and say they are stand-ins
    assert raven.install_raven_shim() is True
    from raven.memory_engine.backend import Memory, MemoryBackend
    from raven.plugin import PluginContext
    from raven.plugins import PluginContext as AlsoPluginContext

    assert (Memory, MemoryBackend) == (raven.Memory, raven.MemoryBackend)
    assert PluginContext is AlsoPluginContext is raven.BackendContext
    assert raven.install_raven_shim() is True  # again: harmless
