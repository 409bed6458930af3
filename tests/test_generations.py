"""Generations and leases: candidates, serving and draining, fail-closed removal, selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemon import (
    CompositionRejected,
    CompositionUnavailable,
    DefinitionError,
    InstallError,
    MemoryHost,
)
from mnemon.sdk import SourceInit
from tests.kit import Probe, fake_source, strategy_plugin


def generation_id(host: MemoryHost) -> str | None:
    serving = host.inspect()["serving"]
    return serving["generation_id"] if serving else None


async def test_replacement_serves_a_new_generation_while_the_old_drains() -> None:
    source, probe = fake_source()
    extra, extra_probe = fake_source(Probe(text="extra"))
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(source, instance_id="a")
        first = generation_id(host)
        turn = await host.begin_turn()
        await host.mount(extra, instance_id="b")
        report = host.inspect()
        assert report["serving"]["generation_id"] != first
        assert report["draining"] == [{"generation_id": first, "leases": 1}]
        assert probe.disposed == []
        await turn.release()
        assert probe.disposed == ["source:a"]
        await turn.release()
        assert probe.disposed == ["source:a"]
        assert host.inspect()["draining"] == []
    # the host's own dispose retires the second generation: each runtime disposed once
    assert probe.disposed == ["source:a", "source:a"]
    assert extra_probe.disposed == ["source:b"]


async def test_a_failing_factory_on_an_additive_change_keeps_serving() -> None:
    source, _ = fake_source()

    def explode(init: SourceInit) -> None:
        raise RuntimeError("factory exploded with token=hunter2")

    broken, broken_probe = fake_source(Probe(on_create=explode))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        before = generation_id(host)
        with pytest.raises(
            InstallError, match="Memory Source source:broken factory failed"
        ) as caught:
            await host.mount(broken, instance_id="broken")
        assert "hunter2" not in str(caught.value)
        report = host.inspect()
        assert report["state"] == "rejected"
        assert report["serving"]["generation_id"] == before
        assert "hunter2" not in str(report)
        async with host.turn() as turn:
            assert [f.source_key for f in turn.view.fragments] == ["source:a"]
    assert broken_probe.created == []


async def test_a_failing_factory_disposes_the_runtimes_already_made() -> None:
    early, early_probe = fake_source()

    def explode(init: SourceInit) -> None:
        raise RuntimeError("boom")

    late, _ = fake_source(Probe(on_create=explode))
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(early, instance_id="a")
        with pytest.raises(InstallError):
            await host.mount(late, instance_id="z")
        # the candidate made a second runtime of source:a, then disposed it; the first serves on
        assert early_probe.created == ["source:a", "source:a"]
        assert early_probe.disposed == ["source:a"]


async def test_removing_the_only_strategy_fails_closed_while_a_pinned_turn_works() -> None:
    source, probe = fake_source()
    async with MemoryHost() as host:
        unmount = await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(source, instance_id="a")
        async with host.turn() as pinned:
            await unmount()
            report = host.inspect()
            assert report["state"] == "incomplete"
            assert report["serving"] is None
            assert report["diagnostics"] == [
                {
                    "code": "missing-strategy",
                    "message": "no memory Strategy is installed",
                    "key": None,
                    "reason": None,
                }
            ]
            with pytest.raises(
                CompositionUnavailable, match=r"incomplete: no memory Strategy is installed"
            ):
                async with host.turn():
                    pass
            assert pinned.view.fragments[0].text == "remembered text"
            assert probe.disposed == []
        assert probe.disposed == ["source:a"]


async def test_nothing_installed_and_sources_only_are_incomplete() -> None:
    async with MemoryHost() as host:
        assert host.inspect()["state"] == "empty"
        with pytest.raises(CompositionUnavailable):
            await host.begin_turn()
        source, _ = fake_source()
        await host.mount(source, instance_id="a")
        report = host.inspect()
        assert report["state"] == "incomplete"
        assert report["diagnostics"][0]["code"] == "missing-strategy"
        strategy_only = MemoryHost()
        await strategy_only.mount(strategy_plugin(), instance_id="s")
        assert strategy_only.inspect()["diagnostics"][0]["code"] == "missing-source"
        await strategy_only.dispose()


async def test_a_configuration_change_gives_a_new_generation_and_identity_is_reused() -> None:
    source, probe = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a", config={"depth": 1})
        await host.mount(strategy_plugin(), instance_id="strategy")
        first = generation_id(host)
        await host.reconfigure(source_configuration={"source:a": {"depth": 2}})
        second = generation_id(host)
        assert second != first
        assert probe.inits[-1].configuration == {"depth": 2}
        created = len(probe.created)
        await host.reconfigure(source_configuration={"source:a": {"depth": 2}})
        assert generation_id(host) == second
        assert len(probe.created) == created


async def test_equal_inputs_give_equal_generation_ids() -> None:
    ids = []
    for _ in range(2):
        source, _ = fake_source()
        async with MemoryHost(source_timeout=5) as host:
            await host.mount(source, instance_id="a", config={"k": [1, 2]})
            await host.mount(strategy_plugin(), instance_id="strategy")
            ids.append(generation_id(host))
    assert ids[0] == ids[1]
    assert ids[0] is not None
    assert ids[0].startswith("generation:")


async def test_two_strategies_without_a_selection_are_rejected() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(type_id="first"), instance_id="one")
        with pytest.raises(
            InstallError, match="exactly one memory Strategy must be selected; found 2"
        ):
            await host.mount(strategy_plugin(type_id="second"), instance_id="two")


async def test_selection_by_type_id_and_instance_key() -> None:
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="second") as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(type_id="first"), instance_id="one")
        await host.mount(strategy_plugin(type_id="second"), instance_id="two")
        async with host.turn() as turn:
            assert turn.view.strategy_key == "strategy:two"
        await host.reconfigure(strategy_type_id="strategy:one")
        async with host.turn() as turn:
            assert turn.view.strategy_type_id == "first"


async def test_an_ambiguous_selection_is_rejected() -> None:
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="same") as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(type_id="same"), instance_id="one")
        with pytest.raises(
            InstallError, match=r"selection 'same' is ambiguous: strategy:one, strategy:two"
        ):
            await host.mount(strategy_plugin(type_id="same"), instance_id="two")


async def test_sole_strategy_fallback_emits_its_diagnostic() -> None:
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="absent", strategy_fallback="sole-strategy") as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="only")
        async with host.turn() as turn:
            codes = [(d.code, d.key) for d in turn.view.diagnostics]
            assert ("strategy-fallback", "strategy:only") in codes
            assert "absent" in turn.view.diagnostics[0].message


async def test_a_missing_selection_without_fallback_is_incomplete() -> None:
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="absent") as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="only")
        report = host.inspect()
        assert report["state"] == "incomplete"
        assert report["diagnostics"][0] == {
            "code": "missing-strategy",
            "message": "selected memory Strategy 'absent' is not installed",
            "key": None,
            "reason": None,
        }
        await host.mount(strategy_plugin(type_id="absent"), instance_id="later")
        async with host.turn() as turn:
            assert turn.view.strategy_key == "strategy:later"


async def test_a_rejected_reconfiguration_changes_nothing() -> None:
    source, _ = fake_source()
    async with MemoryHost(strategy_type_id="strategy:one") as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(type_id="same"), instance_id="one")
        await host.mount(strategy_plugin(type_id="same"), instance_id="two")
        before = generation_id(host)
        with pytest.raises(CompositionRejected, match="'same' is ambiguous"):
            await host.reconfigure(strategy_type_id="same")
        assert generation_id(host) == before
        assert host.inspect()["state"] == "rejected"
        async with host.turn() as turn:
            assert turn.view.strategy_key == "strategy:one"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"source_timeout": 0}, "source_timeout"),
        ({"source_timeout": 301}, "source_timeout"),
        ({"source_timeout": float("nan")}, "source_timeout"),
        ({"source_timeout": True}, "source_timeout"),
        ({"strategy_fallback": "first"}, "strategy_fallback"),
        ({"source_capabilities": {"source:a": ["teleport"]}}, "unknown capability 'teleport'"),
        ({"source_configuration": {"source:a": [1]}}, r"source_configuration\['source:a'\]"),
    ],
    ids=[
        "zero-timeout",
        "long-timeout",
        "nan-timeout",
        "bool-timeout",
        "bad-fallback",
        "bad-capability",
        "non-object-configuration",
    ],
)
def test_host_arguments_are_validated(arguments: dict, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        MemoryHost(**arguments)


async def test_the_hosts_data_dir_reaches_sources(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mnemon.sdk import source_data_directory

    source, probe = fake_source()
    async with MemoryHost(data_dir=tmp_path) as host:
        await host.mount(source, instance_id="work:a/b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        first = host.inspect()["serving"]["generation_id"]
    init = probe.inits[0]
    assert init.data_dir == str(tmp_path)
    folder = source_data_directory(init)
    assert folder.parent == tmp_path / "sources" / "fake"
    assert folder.name.startswith("work_a_b~")
    assert source_data_directory(init, "/elsewhere").parent == Path("/elsewhere/sources/fake")
    with pytest.raises(
        DefinitionError, match=r"^configuration\.data_dir: must be an absolute path$"
    ):
        source_data_directory(init, "relative/tok_SECRET123")
    with pytest.raises(DefinitionError, match=r"^data_dir: must be an absolute path$"):
        MemoryHost(data_dir="relative/tok_SECRET123")
    source, _ = fake_source()
    async with MemoryHost(data_dir=tmp_path / "other") as host:
        await host.mount(source, instance_id="work:a/b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        assert host.inspect()["serving"]["generation_id"] != first


async def test_bad_configuration_fails_at_mount_even_before_a_strategy_exists() -> None:
    def strict(init: SourceInit) -> None:
        if init.configuration.get("depth") != 1:
            raise DefinitionError("fake configuration.depth: must be 1")

    source, probe = fake_source(Probe(on_create=strict))
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match=r"configuration\.depth: must be 1"):
            await host.mount(source, instance_id="a", config={"depth": 2})
        assert host.inspect()["registry_revision"] == 0
        await host.mount(source, instance_id="a", config={"depth": 1})
        assert host.inspect()["state"] == "incomplete"
        # the trial runtime was made and disposed; nothing serves until a Strategy arrives
        assert probe.created == ["source:a"]
        assert probe.disposed == ["source:a"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("a/b", "a_b-c14cddc033"),  # the short hash of "a/b" once made these collide
        ("a/b", "a:b"),
        ("a/b", "a_b"),
        ("x" * 200 + "/1", "x" * 200 + "/2"),  # long keys differ past the readable prefix
        ("x" * 161, "x" * 160),
    ],
)
def test_distinct_entries_never_share_a_data_folder(first: str, second: str) -> None:
    from mnemon import SourceProvenance
    from mnemon.sdk import source_data_directory

    def folder(entry: str) -> Path:
        init = SourceInit(
            instance_key=f"source:{entry}",
            provenance=SourceProvenance(entry_id=entry, package_name="p", type_id="fake"),
            configuration={},
            data_dir="/data",
        )
        path = source_data_directory(init)
        assert len(path.name.encode()) <= 255
        assert path.parent == Path("/data/sources/fake")
        return path

    assert folder(first) != folder(second)
    assert folder(first) == folder(first)
    assert folder("work").name == "work"  # plain ids keep their readable folder
