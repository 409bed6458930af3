"""Raven plugins found by mnemon's discovery: a `raven-plugin.toml` backend used by its name."""

from __future__ import annotations

import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import mnemon_source_raven as raven
import pytest

from mnemon import DefinitionError, InstallError, MemoryHost, discover_plugins, load_profile
from mnemon_testing import MemoryCompositionRunner, SelectAll

MANIFEST = textwrap.dedent(
    """
    [plugin]
    id = "lite-memory"
    version = "1.0.0"
    display_name = "Lite memory"
    raven = ">=0.1"
    bundled = false
    enabled_by_default = true

    [[plugin.contributes.memory_backends]]
    name = "lite"
    factory = "lite_backend:make_backend"

    # a kind of contribution mnemon does not host: ignored
    [[plugin.contributes.tools]]
    name = "lite-tool"
    factory = "lite_backend:make_tool"
    """
)

# written as a Raven author writes a backend: a factory taking the context, async methods,
# the identity from the plugin config
BACKEND = textwrap.dedent(
    """
    from raven.memory_engine import Memory

    class LiteBackend:
        def __init__(self, ctx):
            self.rows = {}
            self.prefix = ctx.config.get("prefix", "")
            self.owner = ctx.config.get("user_id") or ctx.config.get("agent_id")

        async def start(self):
            pass

        async def stop(self):
            pass

        async def recall(self, query, *, user_id=None, agent_id=None, top_k):
            rows = self.rows.get(user_id or agent_id, [])
            hits = [text for text in rows if query.lower() in text.lower()]
            return [Memory(text=self.prefix + text, score=0.5) for text in hits[:top_k]]

        async def store(self, session_id, messages):
            self.rows.setdefault(self.owner, []).extend(m["content"] for m in messages)

        async def feedback(self, signals):
            pass

    def make_backend(ctx):
        return LiteBackend(ctx)
    """
)


def allow(offer: object) -> bool:
    return True


def drop_in(root: Path, *, backend: str = BACKEND) -> Path:
    folder = root / "lite"
    folder.mkdir(parents=True)
    (folder / "raven-plugin.toml").write_text(MANIFEST, encoding="utf-8")
    (folder / "lite_backend.py").write_text(backend, encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # the user's plugin folder is $MNEMON_HOME/plugins: an empty one unless a test fills it
    folder = tmp_path / "home"
    monkeypatch.setenv("MNEMON_HOME", str(folder))
    return folder


async def test_a_project_drop_in_backend_serves_through_a_profile(tmp_path: Path) -> None:
    drop_in(tmp_path / ".mnemon" / "plugins")
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        textwrap.dedent(
            """
            [strategy]
            use = "general"

            [[entries]]
            id = "general"
            plugin = "general"

            [[entries]]
            id = "memory"
            plugin = "raven"
            config = { backend = "lite", backend_config = { prefix = "lite: " } }
            """
        ),
        encoding="utf-8",
    )
    path_before = list(sys.path)
    async with load_profile(profile).open_host() as host:
        async with host.turn(scope={"user_id": "ada"}) as turn:
            receipt = await turn.execute_action(
                "source:memory/store",
                {"messages": [{"role": "user", "content": "Ada drinks green tea."}]},
                allow,
            )
        async with host.turn(scope={"user_id": "ada"}) as turn:
            evidence = await turn.execute_route("source:memory/recall", {"query": "green tea"})
    assert receipt.completion == "accepted"
    assert [item.text for item in evidence.items] == ["lite: Ada drinks green tea."]
    assert evidence.items[0].provenance["backend"] == "lite"
    # loaded under a private module name, sys.path untouched
    assert "lite_backend" not in sys.modules
    assert sys.path == path_before


async def test_a_user_drop_in_backend_serves_a_memory_host(tmp_path: Path, home: Path) -> None:
    drop_in(home / "plugins")
    async with MemoryHost(data_dir=tmp_path / "data") as host:
        await host.mount(raven, instance_id="memory", config={"backend": "lite", "track": "agent"})
        await host.mount(SelectAll(), instance_id="all", config={"required": True})
        async with host.turn(scope={"agent_id": "planner"}) as turn:
            await turn.execute_action(
                "source:memory/store",
                {"messages": [{"role": "assistant", "content": "Booked room 3."}]},
                allow,
            )
            evidence = await turn.execute_route("source:memory/recall", {"query": "room"})
    assert [item.text for item in evidence.items] == ["Booked room 3."]


def test_discovery_lists_the_backend_supported_while_this_package_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_in(tmp_path / ".mnemon" / "plugins")
    found = discover_plugins(project_dir=tmp_path).get("lite-memory")
    assert found is not None
    assert found.manifest is not None
    assert (found.status, found.origin) == ("available", "project")
    assert [(e.name, e.unsupported) for e in found.manifest.entries] == [("lite", False)]
    # without the Raven adapter installed there is nothing to host it
    monkeypatch.setitem(sys.modules, "mnemon_source_raven", None)
    absent = discover_plugins(project_dir=tmp_path).get("lite-memory")
    assert absent is not None
    assert absent.status == "unsupported"


async def test_a_profile_entry_naming_the_raven_plugin_itself_says_how_to_use_it(
    tmp_path: Path,
) -> None:
    drop_in(tmp_path / ".mnemon" / "plugins")
    profile = tmp_path / "mnemon.toml"
    profile.write_text('[[entries]]\nid = "m"\nplugin = "lite-memory"\n', encoding="utf-8")
    with pytest.raises(InstallError, match="mount the raven plugin with backend = 'lite'"):
        load_profile(profile).entries[0].load_plugin(profile)


async def test_an_unknown_name_lists_the_names_found(tmp_path: Path) -> None:
    drop_in(tmp_path / ".mnemon" / "plugins")
    with pytest.raises(DefinitionError, match=r"no memory backend named 'lit' \(known: .*lite"):
        raven.resolve_backend_factory("lit", project_dir=tmp_path)
    # the project's plugins are the profile's: another folder does not see them
    with pytest.raises(DefinitionError, match="no memory backend named 'lite'"):
        raven.resolve_backend_factory("lite", project_dir=tmp_path / "elsewhere")


async def test_a_factory_that_fails_to_import_is_unavailable_naming_the_plugin_never_the_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = "raise RuntimeError('tok-SECRET-9 in the module')\n"
    drop_in(tmp_path / ".mnemon" / "plugins", backend=broken)
    strategy = SelectAll()
    runner = MemoryCompositionRunner(config_dir=tmp_path, data_dir=tmp_path / "data")
    async with runner:
        await runner.mount(raven, instance_id="memory", config={"backend": "lite"})
        await runner.mount(strategy, instance_id="all", config={"required": False})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        await turn.release()
    assert {(c.facts.availability, c.facts.reason) for c in strategy.seen} == {
        ("unavailable", "backend-import-failed")
    }
    logged = [r.getMessage() for r in caplog.records]
    assert any("'lite-memory'" in m and "RuntimeError" in m for m in logged), logged
    shown = "\n".join(logged) + "".join(
        "".join(traceback.format_exception(r.exc_info[1])) for r in caplog.records if r.exc_info
    )
    assert "tok-SECRET" not in shown


def test_a_name_may_be_written_as_raven_writes_it() -> None:
    calls: list[Any] = []
    raven.register_memory_backend("team.memory-v2", lambda: calls.append)
    assert raven.resolve_backend_factory("team.memory-v2") == calls.append
