"""The activation graph: checked before any Source factory runs."""

from __future__ import annotations

import pytest

from mnemon import InstallError, MemoryHost
from mnemon.sdk import define_memory_plugin
from tests.kit import fake_source, strategy_plugin


def descriptor(package: str, provides: list, requires: list | None = None) -> object:
    return define_memory_plugin(
        package,
        "Test plugin",
        "A plugin of the graph tests.",
        ["source", "strategy"],
        provides,
        requires or [],
    )


async def test_missing_requirement_rejects_before_any_factory_runs() -> None:
    source, probe = fake_source(role="notes")
    needy = strategy_plugin(
        descriptor=descriptor("mnemon-test-needy", ["strategy.needy"], ["source.durable-evidence"])
    )
    async with MemoryHost() as host:
        await host.mount(needy, instance_id="needy")
        with pytest.raises(
            InstallError,
            match=r"dependency unavailable: mnemon-test-needy requires source\.durable-evidence",
        ):
            await host.mount(source, instance_id="notes")
        report = host.inspect()
        assert report["state"] == "rejected"
        assert report["diagnostics"][0]["code"] == "composition-rejected"
        assert report["entries"] == ["needy"]
    assert probe.created == []


async def test_exclusive_conflict_rejects_before_any_factory_runs() -> None:
    first, probe = fake_source()
    first.memory_plugin = descriptor("mnemon-test-a", [{"id": "memory.store", "exclusive": True}])
    second, _ = fake_source(probe)
    second.memory_plugin = descriptor("mnemon-test-b", ["memory.store"])
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(first, instance_id="a")
        created = list(probe.created)
        with pytest.raises(
            InstallError,
            match=r"capability conflict: memory.store \(mnemon-test-a, mnemon-test-b\)",
        ):
            await host.mount(second, instance_id="b")
        assert probe.created == created
        assert host.inspect()["serving"] is not None


async def test_the_same_exclusive_plugin_twice_conflicts_with_itself() -> None:
    plugin, _ = fake_source()
    plugin.memory_plugin = descriptor("mnemon-test-a", [{"id": "memory.store", "exclusive": True}])
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(plugin, instance_id="a")
        with pytest.raises(
            InstallError,
            match=r"capability conflict: memory.store \(mnemon-test-a, mnemon-test-a\)",
        ):
            await host.mount(plugin, instance_id="b")


async def test_a_source_without_descriptor_satisfies_its_role_capability() -> None:
    source, probe = fake_source(role="durable-evidence")
    assert source.memory_plugin is None
    needy = strategy_plugin(
        descriptor=descriptor(
            "mnemon-test-needy",
            ["strategy.needy"],
            ["source.durable-evidence", "source", "strategy"],
        )
    )
    async with MemoryHost() as host:
        await host.mount(needy, instance_id="needy")
        await host.mount(source, instance_id="spaces")
        assert host.inspect()["state"] == "serving"
        async with host.turn() as turn:
            assert turn.view.fragments[0].source_key == "source:spaces"
    assert probe.created == ["source:spaces"]


async def test_removing_a_provider_fails_closed() -> None:
    durable, _ = fake_source(role="durable-evidence")
    notes, _ = fake_source(role="notes")
    needy = strategy_plugin(
        descriptor=descriptor("mnemon-test-needy", ["strategy.needy"], ["source.durable-evidence"])
    )
    async with MemoryHost() as host:
        unmount = await host.mount(durable, instance_id="spaces")
        await host.mount(notes, instance_id="notes")
        await host.mount(needy, instance_id="needy")
        async with host.turn() as pinned:
            await unmount()
            report = host.inspect()
            assert report["state"] == "rejected"
            assert report["serving"] is None
            assert "dependency unavailable" in report["diagnostics"][0]["message"]
            # the pinned turn keeps its generation
            assert {f.source_key for f in pinned.view.fragments} == {
                "source:spaces",
                "source:notes",
            }
            assert report["draining"][0]["leases"] == 1


async def test_without_a_strategy_the_graph_is_still_checked_before_any_factory() -> None:
    # mounted first, with nothing else installed: no Strategy, so nothing could serve yet
    source, probe = fake_source(role="notes")
    source.memory_plugin = descriptor("mnemon-test-needy", ["notes.extra"], ["search.index"])
    async with MemoryHost() as host:
        with pytest.raises(
            InstallError, match=r"dependency unavailable: mnemon-test-needy requires search\.index"
        ):
            await host.mount(source, instance_id="needy")
        assert probe.created == []
        assert host.inspect()["entries"] == []
        # the blame stays with the Source: a Strategy mounted afterwards serves nothing wrong
        await host.mount(strategy_plugin(), instance_id="strategy")
        assert host.inspect()["state"] == "incomplete"
