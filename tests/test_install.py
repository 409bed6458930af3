"""Installation: entry-bound registration, atomic batches, listeners, the narrow service."""

from __future__ import annotations

from typing import Any

import pytest

from mnemon import DefinitionError, InstallError, MemoryHost, RegistrySnapshot
from mnemon.sdk import PluginContext, define_memory_plugin, install_memory
from tests.kit import Plugin, Probe, fake_source, strategy_plugin


def serving_keys(host: MemoryHost) -> list[str]:
    serving = host.inspect()["serving"]
    return [source["key"] for source in serving["sources"]] if serving else []


async def test_entry_bound_disposal_moves_the_registry_revision() -> None:
    async with MemoryHost() as host:
        plugin, _ = fake_source()
        unmount = await host.mount(plugin, instance_id="work")
        assert host.inspect()["registry_revision"] == 1
        await unmount()
        assert host.inspect()["registry_revision"] == 2
        await unmount()
        assert host.inspect()["registry_revision"] == 2
        assert host.inspect()["entries"] == []


async def test_two_instances_of_one_definition_keep_distinct_keys() -> None:
    async with MemoryHost() as host:
        plugin, probe = fake_source()
        unmount_a, _, _ = await host.mount_all(
            [(plugin, "a", None), (plugin, "b", None), (strategy_plugin(), "strategy", None)]
        )
        assert serving_keys(host) == ["source:a", "source:b"]
        await unmount_a()
        assert serving_keys(host) == ["source:b"]
        async with host.turn() as turn:
            assert [f.source_key for f in turn.view.fragments] == ["source:b"]
        # each generation owns its runtimes: the first generation's two were disposed once each
        assert sorted(probe.disposed) == ["source:a", "source:b"]


async def test_duplicate_instance_key_fails_and_keeps_the_first_owner() -> None:
    plugin, _ = fake_source()
    definition = plugin.sources[0]

    class Shared:
        def apply(self, ctx: PluginContext) -> None:
            install_memory(ctx, sources=[definition], instance_id="shared")

    async with MemoryHost() as host:
        await host.mount(Shared(), instance_id="first")
        with pytest.raises(InstallError, match=r"source:shared is already installed"):
            await host.mount(Shared(), instance_id="second")
        assert host.inspect()["entries"] == ["first"]
        assert host.inspect()["registry_revision"] == 1
        with pytest.raises(InstallError, match="entry 'first' is already mounted"):
            await host.mount(Shared(), instance_id="first")


async def test_apply_raising_after_registering_leaves_nothing_and_remount_works() -> None:
    plugin, _ = fake_source()
    broken = Plugin(sources=plugin.sources, fail_after_install=True)
    disposed: list[str] = []

    class Tracked(Plugin):
        def apply(self, ctx: PluginContext) -> None:
            ctx.on_dispose(lambda: disposed.append("cleanup"))
            super().apply(ctx)

    tracked = Tracked(sources=plugin.sources, fail_after_install=True)
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match=r"entry 'work': plugin apply\(\) failed"):
            await host.mount(broken, instance_id="work")
        with pytest.raises(InstallError):
            await host.mount(tracked, instance_id="work")
        assert disposed == ["cleanup"]
        report = host.inspect()
        assert report["registry_revision"] == 0
        assert report["entries"] == []
        await host.mount(plugin, instance_id="work")
        assert host.inspect()["registry_revision"] == 1


async def test_empty_contribution_is_rejected() -> None:
    class Empty:
        def apply(self, ctx: PluginContext) -> None:
            install_memory(ctx)

    async with MemoryHost() as host:
        with pytest.raises(InstallError, match="an empty contribution installs nothing"):
            await host.mount(Empty(), instance_id="nothing")
        assert host.inspect()["registry_revision"] == 0


async def test_memory_service_exposes_only_install_contributions() -> None:
    plugin, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(plugin, instance_id="work")
    service = plugin.contexts[0].memory
    assert [name for name in dir(service) if not name.startswith("_")] == ["install_contributions"]
    with pytest.raises(AttributeError):
        service.registry = None  # type: ignore[attr-defined]


async def test_listeners_receive_frozen_snapshots() -> None:
    seen: list[RegistrySnapshot] = []
    async with MemoryHost() as host:
        unsubscribe = host.subscribe(seen.append)
        plugin, _ = fake_source()
        unmount = await host.mount(plugin, instance_id="work")
        await unmount()
        unsubscribe()
        await host.mount(plugin, instance_id="again")
    assert [snapshot.revision for snapshot in seen] == [1, 2]
    assert [c.instance_key for c in seen[0].contributions] == ["source:work"]
    assert seen[0].contributions[0].entry_id == "work"
    assert seen[1].contributions == ()
    with pytest.raises(Exception, match="frozen"):
        seen[0].revision = 5  # type: ignore[misc]


async def test_one_call_with_several_of_a_kind_appends_type_ids() -> None:
    first = fake_source(type_id="alpha")[0].sources[0]
    second = fake_source(type_id="beta")[0].sources[0]
    twins = Plugin(sources=[first, second])
    duplicated = Plugin(sources=[first, first])
    seen: list[RegistrySnapshot] = []
    async with MemoryHost() as host:
        host.subscribe(seen.append)
        await host.mount(twins, instance_id="pair")
        with pytest.raises(InstallError, match="installed twice in one batch"):
            await host.mount(duplicated, instance_id="dup")
    assert [c.instance_key for c in seen[-1].contributions] == [
        "source:pair/alpha",
        "source:pair/beta",
    ]


async def test_descriptor_roles_bound_what_a_plugin_installs() -> None:
    descriptor = define_memory_plugin(
        "mnemon-test-fake", "Fake", "Declares only a Strategy.", ["strategy"], ["x.y"]
    )
    plugin, _ = fake_source()
    plugin.memory_plugin = descriptor
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match="does not declare role 'source'"):
            await host.mount(plugin, instance_id="work")


async def test_on_dispose_callbacks_run_newest_first_on_unmount() -> None:
    order: list[str] = []

    class WithCallbacks:
        def apply(self, ctx: PluginContext) -> None:
            plugin, _ = fake_source()
            install_memory(ctx, sources=plugin.sources)
            ctx.on_dispose(lambda: order.append("sync"))

            async def later() -> None:
                order.append("async")

            ctx.on_dispose(later)

    async with MemoryHost() as host:
        unmount = await host.mount(WithCallbacks(), instance_id="work")
        assert order == []
        await unmount()
        assert order == ["async", "sync"]


@pytest.mark.parametrize(
    ("instance_id", "config", "message"),
    [
        ("", None, "entry id ''"),
        ("bad id", None, "entry id 'bad id'"),
        (
            "work",
            {"ratio": float("nan")},
            r"entry 'work' configuration: non-finite number nan at \$.ratio",
        ),
        ("work", {"when": {1, 2}}, r"unsupported type set at \$.when"),
        ("work", ["not", "an", "object"], "must be a JSON object"),
    ],
    ids=["empty-id", "space-in-id", "nan-config", "set-config", "list-config"],
)
async def test_invalid_mounts_are_refused_with_the_field_named(
    instance_id: str, config: object, message: str
) -> None:
    plugin, _ = fake_source()
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match=message):
            await host.mount(plugin, instance_id=instance_id, config=config)  # type: ignore[arg-type]
        assert host.inspect()["registry_revision"] == 0


async def test_install_memory_checks_its_arguments() -> None:
    class Wrong:
        def apply(self, ctx: PluginContext) -> None:
            install_memory(ctx, sources=["not a definition"])  # type: ignore[list-item]

    async with MemoryHost() as host:
        with pytest.raises(InstallError, match=r"sources\[0\]: expected a define_memory_source"):
            await host.mount(Wrong(), instance_id="work")
    with pytest.raises(InstallError, match="PluginContext"):
        install_memory(object())  # type: ignore[arg-type]


async def test_plugin_without_apply_is_refused() -> None:
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match=r"has no apply\(ctx\)"):
            await host.mount(object(), instance_id="work")


async def test_entry_configuration_reaches_the_factory_frozen() -> None:
    plugin, probe = fake_source()
    config = {"nested": {"items": [1, 2]}}
    async with MemoryHost() as host:
        await host.mount(plugin, instance_id="work", config=config)
        config["nested"]["items"].append(3)  # type: ignore[index]
        await host.mount(strategy_plugin(), instance_id="strategy")
    assert probe.inits[0].configuration == {"nested": {"items": (1, 2)}}
    with pytest.raises(TypeError):
        probe.inits[0].configuration["nested"]["extra"] = 1  # type: ignore[index]
    assert probe.inits[0].provenance.entry_id == "work"


async def test_mount_all_checks_the_graph_on_the_whole_batch_and_builds_once() -> None:
    needy = strategy_plugin(
        descriptor=define_memory_plugin(
            "mnemon-test-needy", "Needy", "Needs evidence.", ["strategy"], ["strategy.needy"],
            ["source.durable-evidence"],
        )
    )  # fmt: skip
    source, probe = fake_source(role="durable-evidence")
    async with MemoryHost() as host:
        unmounts = await host.mount_all([(needy, "needy", None), (source, "spaces", {"k": 1})])
        assert host.inspect()["state"] == "serving"
        assert host.inspect()["registry_revision"] == 1
        assert probe.created == ["source:spaces"]
        assert len(unmounts) == 2
        await unmounts[1]()
        assert host.inspect()["entries"] == ["needy"]


async def test_mount_all_is_all_or_nothing() -> None:
    good, probe = fake_source()

    def explode(init: object) -> None:
        raise RuntimeError("no")

    bad, _ = fake_source(Probe(on_create=explode))
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match="factory failed"):
            await host.mount_all(
                [(good, "good", None), (strategy_plugin(), "strategy", None), (bad, "bad", None)]
            )
        assert host.inspect()["entries"] == []
        assert host.inspect()["registry_revision"] == 0
        with pytest.raises(InstallError, match="mounted twice in one call"):
            await host.mount_all([(good, "same", None), (good, "same", None)])
    assert probe.disposed == probe.created


class _SyncFacts:
    """A Source runtime whose facts() is a plain function: a shape error, found at mount."""

    def __init__(self, init: Any) -> None:
        self.key = init.instance_key

    def facts(self, request: Any) -> Any:
        raise AssertionError("never called")

    async def project(self, request: Any) -> Any:
        raise AssertionError("never called")


async def test_a_source_whose_callbacks_are_not_coroutines_is_refused_at_mount() -> None:
    from mnemon.sdk import define_memory_source
    from tests.kit import source_manifest

    definition = define_memory_source(
        source_manifest(routes=(), actions=(), capabilities=("project",)), _SyncFacts
    )
    async with MemoryHost() as host:
        with pytest.raises(
            InstallError,
            match=r"Memory Source source:bad runtime: facts\(\) must be an async function "
            r"\(async def\), not a plain function",
        ):
            await host.mount(Plugin(sources=[definition]), instance_id="bad")
        assert host.inspect()["entries"] == []


class _Partitioned:
    """A Source runtime whose configuration may name its own partition_keys."""

    def __init__(self, init: Any) -> None:
        self.key = init.instance_key
        if "keys" in init.configuration:
            self.partition_keys = init.configuration["keys"]

    async def facts(self, request: Any) -> Any:
        raise AssertionError("never called")

    async def project(self, request: Any) -> Any:
        raise AssertionError("never called")


async def test_a_runtimes_partition_keys_win_over_the_manifests_and_are_checked_at_mount() -> None:
    from mnemon.sdk import define_memory_source
    from tests.kit import source_manifest

    manifest = source_manifest(routes=(), actions=(), capabilities=("project",))
    definition = define_memory_source({**manifest, "partition_keys": ["workspace"]}, _Partitioned)
    async with MemoryHost() as host:
        await host.mount(strategy_plugin(), instance_id="strategy")
        await host.mount(Plugin(sources=[definition]), instance_id="desk")
        await host.mount(
            Plugin(sources=[definition]), instance_id="crew", config={"keys": ["agent_id"]}
        )
        for keys, problem in [
            (["team"], r"partition_keys\[0\]: 'team' is not a scope id \(one of tenant_id"),
            ("user_id", r"partition_keys: must be a list of scope ids"),
        ]:
            with pytest.raises(InstallError, match=rf"Memory Source source:bad runtime: {problem}"):
                await host.mount(
                    Plugin(sources=[definition]), instance_id="bad", config={"keys": keys}
                )
        report = host.inspect()
    assert report["entries"] == ["crew", "desk", "strategy"]
    declared = {item["key"]: item["partition_keys"] for item in report["serving"]["sources"]}
    assert declared == {"source:crew": ["agent_id"], "source:desk": ["workspace"]}


def test_a_strategy_whose_compose_is_a_coroutine_is_refused_at_definition() -> None:
    from mnemon.sdk import define_memory_strategy

    async def compose(request: Any, sources: Any, contributions: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(DefinitionError, match=r"compose: .* must be a plain function \(def\)"):
        define_memory_strategy(
            {
                "type_id": "bad",
                "package_name": "mnemon-test-bad",
                "supported_source_roles": ["*"],
                "max_sources": 1,
                "max_routes": 1,
                "max_actions": 1,
            },
            compose,
        )
