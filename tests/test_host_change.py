"""`MemoryHost.change`: unmount, mount and settings as one atomic change; `installed()`."""

from __future__ import annotations

import pytest

from mnemon import InstallError, MemoryHost, ProvidedCapability
from mnemon.sdk import define_memory_plugin
from tests.kit import Probe, fake_source, strategy_plugin


def descriptor(package: str, provides: list, requires: list | None = None) -> object:
    return define_memory_plugin(
        package, "Test plugin", "A plugin of the change tests.", ["source", "strategy"],
        provides, requires or [],
    )  # fmt: skip


async def test_installed_names_each_contributions_graph_node() -> None:
    source, _ = fake_source(role="durable-evidence")
    source.memory_plugin = descriptor("mnemon-test-store", [{"id": "store", "exclusive": True}])
    needy = strategy_plugin(descriptor=descriptor("mnemon-test-needy", ["x.y"], ["source"]))
    async with MemoryHost() as host:
        await host.mount_all([(source, "spaces", None), (needy, "needy", None)])
        snapshot = host.installed()
    nodes = {item.entry_id: item for item in snapshot.contributions}
    assert nodes["spaces"].provides == (
        ProvidedCapability(id="source"),
        ProvidedCapability(id="source.durable-evidence"),
        ProvidedCapability(id="store", exclusive=True),
    )
    assert nodes["spaces"].requires == ()
    assert [item.id for item in nodes["needy"].provides] == ["strategy", "x.y"]
    assert nodes["needy"].requires == ("source",)


async def test_a_configuration_change_remounts_the_entry_in_one_new_generation() -> None:
    probe = Probe()
    source, _ = fake_source(probe)
    async with MemoryHost() as host:
        await host.mount_all([(strategy_plugin(), "strategy", None), (source, "notes", {"n": 1})])
        before = host.inspect()["serving"]["generation_id"]
        seen: list[int] = []
        host.subscribe(lambda snapshot: seen.append(snapshot.revision))
        async with host.turn() as pinned:
            await host.change([(source, "notes", {"n": 2})], unmount=["notes"])
            # the turn in flight keeps its View and its Source
            assert pinned.view.fragments[0].source_key == "source:notes"
            assert probe.disposed == []
        # the old runtime goes once its turn has ended
        assert probe.disposed == ["source:notes"]
        after = host.inspect()
    assert after["state"] == "serving"
    assert after["serving"]["generation_id"] != before
    assert len(seen) == 1  # one registry change, not an unmount then a mount
    assert [init.configuration["n"] for init in probe.inits] == [1, 2]


async def test_a_rejected_change_leaves_every_entry_and_the_serving_generation() -> None:
    durable, durable_probe = fake_source(role="durable-evidence")
    needy = strategy_plugin(
        descriptor=descriptor("mnemon-test-needy", ["strategy.needy"], ["source.durable-evidence"])
    )
    notes, _ = fake_source(role="notes")
    async with MemoryHost() as host:
        await host.mount_all([(durable, "spaces", None), (needy, "needy", None)])
        before = host.inspect()["serving"]["generation_id"]
        with pytest.raises(
            InstallError,
            match=r"the change was not applied: .*dependency unavailable: mnemon-test-needy "
            r"requires source\.durable-evidence",
        ):
            await host.change([(notes, "notes", None)], unmount=["spaces"])
        report = host.inspect()
        assert report["entries"] == ["needy", "spaces"]
        assert report["serving"]["generation_id"] == before
        async with host.turn() as turn:
            assert {f.source_key for f in turn.view.fragments} == {"source:spaces"}
        # the entry the change would have unmounted still unmounts by its own handle
        await host.unmount("spaces")
        assert host.inspect()["entries"] == ["needy"]
    assert durable_probe.disposed == ["source:spaces"]


async def test_a_change_moves_entries_and_settings_together() -> None:
    first = strategy_plugin(type_id="first")
    second = strategy_plugin(type_id="second")
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="first") as host:
        await host.mount_all([(first, "first", None), (source, "notes", None)])
        await host.change([(second, "second", None)], unmount=["first"], strategy_type_id="second")
        report = host.inspect()
        assert report["entries"] == ["notes", "second"]
        assert report["serving"]["strategy"]["type_id"] == "second"
        assert host.settings.strategy_type_id == "second"
        async with host.turn() as turn:
            assert turn.view.fragments[0].source_key == "source:notes"


async def test_an_unknown_setting_changes_nothing() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        with pytest.raises(Exception, match="unknown host setting 'colour'"):
            await host.change([(source, "notes", None)], colour="blue")
        assert host.inspect()["entries"] == ["strategy"]


async def test_mounting_an_id_already_mounted_without_unmounting_it_is_refused() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="notes")
        with pytest.raises(InstallError, match="entry 'notes' is already mounted"):
            await host.change([(source, "notes", None)])
