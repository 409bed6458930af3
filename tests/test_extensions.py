"""View extensions: slots, ownership, activation, bounded deterministic contributions."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mnemon import CompositionRejected, InstallError, MemoryHost, RegistrySnapshot
from mnemon.sdk import ExtensionRequest, ViewSpec, define_view_extension
from tests.kit import Plugin, fake_source, strategy_plugin

SLOTS = ("selection", "projection", "capture")


def extensible(request: Any, sources: Any, contributions: Any) -> ViewSpec:
    values = {c.slot: c.value for c in contributions}
    chosen = list(sources)
    writable = {s.key for s in sources}
    if "selection" in values:
        keys = values["selection"]["source_keys"]
        chosen = [s for key in keys for s in sources if s.key == key]
        writable = set(values["selection"]["writable_source_keys"])
    budget = request.budget.max_projection_characters
    if "projection" in values:
        budget = min(budget, values["projection"]["max_projection_characters"])
    guidance = None
    if "capture" in values:
        guidance = {"reminders": {"write": values["capture"]["instruction"]}}
    share = budget // max(1, len(chosen))
    return ViewSpec.model_validate(
        {
            "strategy_type_id": "extensible",
            "sources": [
                {
                    "source_key": s.key,
                    "required": False,
                    "projection": {"mode": "eager", "max_characters": share},
                    "route_ids": [r.id for r in s.routes],
                    "action_ids": [a.id for a in s.actions] if s.key in writable else [],
                }
                for s in chosen
            ],
            "explanation": f"{len(chosen)} Sources, {len(contributions)} extensions",
            "guidance": guidance,
        }
    )


def extensible_strategy(**kwargs: Any) -> Plugin:
    return strategy_plugin(extensible, type_id="extensible", extension_slots=SLOTS, **kwargs)


class Counted:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls = 0
        self.requests: list[ExtensionRequest] = []

    def __call__(self, request: ExtensionRequest) -> Any:
        self.calls += 1
        self.requests.append(request)
        return self.value(request) if callable(self.value) else self.value


def extension(slot: str, value: Any, *, target: str = "*", type_id: str | None = None) -> Any:
    contribute = value if isinstance(value, Counted) else Counted(value)
    return define_view_extension(
        type_id or f"test-{slot}", "mnemon-test-extension", slot, contribute, target
    )


SELECTION = {"source_keys": ["source:b", "source:a"], "writable_source_keys": ["source:b"]}
PROJECTION = {"max_projection_characters": 10}
CAPTURE = {"instruction": "Remember decisions the user states.", "action_ids": ["store"]}


async def open_host(*extensions: Any, order: str = "sources-first") -> MemoryHost:
    host = MemoryHost()
    a, _ = fake_source()
    b, _ = fake_source()
    mounts: list[tuple[Any, str]] = [(a, "a"), (b, "b"), (extensible_strategy(), "strategy")]
    mounts += [(Plugin(extensions=[ext]), f"ext-{ext.slot}") for ext in extensions]
    if order == "reversed":
        mounts.reverse()
    for plugin, name in mounts:
        await host.mount(plugin, instance_id=name)
    return host


async def view_of(host: MemoryHost) -> Any:
    async with host.turn() as turn:
        return turn.view


async def test_three_extensions_apply_together_without_changing_the_strategy() -> None:
    host = await open_host(
        extension("selection", SELECTION),
        extension("projection", PROJECTION),
        extension("capture", CAPTURE),
    )
    view = await view_of(host)
    await host.dispose()
    assert view.strategy_key == "strategy:strategy"
    assert [f.source_key for f in view.fragments] == ["source:b", "source:a"]
    assert sum(len(f.text) for f in view.fragments) == 10
    assert [o.source_key for o in view.offers] == ["source:b"]
    assert view.guidance.reminders.write == CAPTURE["instruction"]
    assert [(e.instance_key, e.slot) for e in view.extensions] == [
        ("strategy-extension:ext-capture", "capture"),
        ("strategy-extension:ext-projection", "projection"),
        ("strategy-extension:ext-selection", "selection"),
    ]
    assert all(e.digest.startswith("extension:") for e in view.extensions)
    assert "Remember decisions" not in view.extensions[0].model_dump_json()


async def test_unloading_one_extension_restores_the_baseline_exactly() -> None:
    baseline_host = await open_host()
    baseline = await view_of(baseline_host)
    await baseline_host.dispose()
    host = await open_host(extension("projection", PROJECTION))
    extended = await view_of(host)
    await host.unmount("ext-projection")
    restored = await view_of(host)
    await host.dispose()
    assert extended.id != baseline.id
    assert restored.id == baseline.id
    assert restored.extensions == ()


async def test_installation_order_does_not_change_the_view() -> None:
    made = [extension(slot, value) for slot, value in
            (("selection", SELECTION), ("projection", PROJECTION), ("capture", CAPTURE))]  # fmt: skip
    first = await open_host(*made)
    second = await open_host(*made, order="reversed")
    views = [await view_of(first), await view_of(second)]
    await first.dispose()
    await second.dispose()
    dumps = [v.model_dump(exclude={"created_at", "generation_id"}) for v in views]
    assert dumps[0] == dumps[1]


async def test_contributions_reach_compose_sorted_by_instance_key() -> None:
    seen: list[list[str]] = []

    def record(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        seen.append([c.instance_key for c in contributions])
        return extensible(request, sources, contributions)

    async with MemoryHost() as host:
        source, _ = fake_source()
        await host.mount(source, instance_id="a")
        await host.mount(Plugin(extensions=[extension("projection", PROJECTION)]), instance_id="zz")
        await host.mount(Plugin(extensions=[extension("capture", CAPTURE)]), instance_id="aa")
        await host.mount(
            strategy_plugin(record, type_id="extensible", extension_slots=SLOTS),
            instance_id="strategy",
        )
        await view_of(host)
    assert seen[-1] == ["strategy-extension:aa", "strategy-extension:zz"]


async def test_a_colliding_batch_is_rejected_atomically() -> None:
    seen: list[RegistrySnapshot] = []
    async with MemoryHost() as host:
        host.subscribe(seen.append)
        source, _ = fake_source()
        await host.mount(source, instance_id="a")
        await host.mount(extensible_strategy(), instance_id="strategy")
        await host.mount(
            Plugin(extensions=[extension("selection", SELECTION)]), instance_id="owner"
        )
        batch = Plugin(
            extensions=[
                extension("projection", PROJECTION),
                extension("selection", SELECTION, type_id="second-selection"),
            ]
        )
        with pytest.raises(
            InstallError, match="slot 'selection' is already owned by strategy-extension:owner"
        ):
            await host.mount(batch, instance_id="batch")
        keys = [c.instance_key for c in seen[-1].contributions]
        view = await view_of(host)
    assert not any(key.startswith("strategy-extension:batch") for key in keys)
    assert [e.slot for e in view.extensions] == ["selection"]


async def test_two_extensions_for_one_slot_in_one_batch_collide() -> None:
    twins = Plugin(extensions=[extension("projection", PROJECTION),
                               extension("projection", PROJECTION, type_id="other")])  # fmt: skip
    async with MemoryHost() as host:
        with pytest.raises(InstallError, match="slot 'projection' is already owned"):
            await host.mount(twins, instance_id="twins")
        assert host.inspect()["registry_revision"] == 0


async def test_an_unsupported_slot_keeps_serving_the_old_generation() -> None:
    host = await open_host()
    before = host.inspect()["serving"]["generation_id"]
    odd = define_view_extension(
        "odd", "mnemon-test-extension", "ranking", Counted({}), "extensible"
    )
    with pytest.raises(
        InstallError, match="slot 'ranking', which Strategy extensible does not declare"
    ):
        await host.mount(Plugin(extensions=[odd]), instance_id="odd")
    report = host.inspect()
    await host.dispose()
    assert report["serving"]["generation_id"] == before
    assert report["state"] == "rejected"


async def test_an_extension_for_another_strategy_is_never_called() -> None:
    contribute = Counted(PROJECTION)
    foreign = extension("projection", contribute, target="other-strategy")
    host = await open_host(foreign)
    view = await view_of(host)
    await host.dispose()
    assert contribute.calls == 0
    assert [(d.code, d.key) for d in view.diagnostics] == [
        ("strategy-extension-inactive", "strategy-extension:ext-projection")
    ]
    assert view.extensions == ()


async def test_a_star_extension_for_an_undeclared_slot_is_inactive() -> None:
    contribute = Counted(PROJECTION)
    async with MemoryHost() as host:
        source, _ = fake_source()
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="plain")
        await host.mount(Plugin(extensions=[extension("projection", contribute)]), instance_id="p")
        view = await view_of(host)
    assert contribute.calls == 0
    assert view.diagnostics[0].code == "strategy-extension-inactive"


async def test_an_extension_installed_before_its_strategy_waits() -> None:
    contribute = Counted(PROJECTION)
    async with MemoryHost(strategy_type_id="extensible") as host:
        source, _ = fake_source()
        await host.mount(
            Plugin(extensions=[extension("projection", contribute, target="extensible")]),
            instance_id="early",
        )
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="plain")
        assert host.inspect()["state"] == "incomplete"
        assert contribute.calls == 0
        await host.mount(extensible_strategy(), instance_id="strategy")
        view = await view_of(host)
    assert contribute.calls == 2
    assert [e.instance_key for e in view.extensions] == ["strategy-extension:early"]


async def test_extensions_see_their_configuration_and_the_sources() -> None:
    contribute = Counted(
        lambda request: {"max_projection_characters": request.configuration["cap"]}
    )
    plugin = Plugin(extensions=[extension("projection", contribute)])
    async with MemoryHost() as host:
        source, _ = fake_source()
        await host.mount(source, instance_id="a")
        await host.mount(extensible_strategy(), instance_id="strategy")
        await host.mount(plugin, instance_id="cap", config={"cap": 7})
        view = await view_of(host)
    assert sum(len(f.text) for f in view.fragments) == 7
    request = contribute.requests[0]
    assert [s.key for s in request.sources] == ["source:a"]
    assert request.instance_key == "strategy-extension:cap"


counter = itertools.count()


@pytest.mark.parametrize(
    ("slot", "value", "message"),
    [
        ("projection", lambda request: {"max_projection_characters": 1 + next(counter)}, "not deterministic"),
        ("capture", {"instruction": "x", "action_ids": ["store"], "blob": {1, 2}}, "unsupported type set"),
        ("capture", {"instruction": "x" * 64_001, "action_ids": ["store"]}, "exceeds 64,000 characters"),
        ("projection", {"max_projection_characters": 0}, r"projection value\.max_projection_characters"),
        ("projection", {"max_projection_characters": 2.5}, r"projection value\.max_projection_characters"),
        ("selection", {"source_keys": ["source:a"], "writable_source_keys": ["source:b"]}, "'source:b' is not in source_keys"),
        ("capture", {"action_ids": ["store"]}, r"capture value\.instruction"),
        ("projection", lambda request: 1 / 0, r"contribute\(\) failed"),
    ],
    ids=["non-deterministic", "non-json", "oversized", "zero-projection", "fractional-projection",
         "writable-outside-selection", "capture-without-instruction", "raising"],
)  # fmt: skip
async def test_bad_contributions_are_rejected_and_the_lease_released(
    slot: str, value: Any, message: str
) -> None:
    host = await open_host(extension(slot, value))
    with pytest.raises(CompositionRejected, match=message):
        await host.begin_turn()
    assert host.inspect()["serving"]["leases"] == 0
    await host.dispose()
