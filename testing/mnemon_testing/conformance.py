"""The Source conformance suite: what every Source author runs on their Source.

Subclass `SourceConformance` in a test module named like `Test...`, say how to configure
the Source on a temporary directory, which scopes to try, and how to write and find a marker;
pytest then runs every check against real compositions::

    class TestMySource(SourceConformance):
        plugin = my_plugin
        scopes = ({"user_id": "u1"}, {"user_id": "u2"})

        def configure(self, directory):
            return {"data_dir": str(directory)}

        def write(self, marker):
            return "remember", {"text": marker}

        def query(self, marker):
            return "recall", {"query": marker}

Each check fails with a message naming the rule the Source broke.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import orjson
import pytest

from mnemon import (
    ActionError,
    CompositionRejected,
    ManagementError,
    MnemonError,
    RevisionConflict,
    RouteError,
    SourceCandidate,
    View,
)

from ._runner import MemoryCompositionRunner, RunnerTurn
from ._select import SelectAll

__all__ = ["SourceConformance"]

Call = tuple[str, Mapping[str, Any]]
_counter = itertools.count()


def _allow(offer: object) -> bool:
    return True


class _Observer:
    """Everything the suite saw, for the secret scan."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, value: Any) -> None:
        if hasattr(value, "model_dump_json"):
            self.texts.append(value.model_dump_json())
        elif isinstance(value, BaseException):
            self.texts.append(f"{type(value).__name__}: {value}")
        else:
            self.texts.append(orjson.dumps(value, default=str).decode())


class _Harness:
    """A runner with the Source under test mounted, and that Source's key."""

    def __init__(
        self, runner: MemoryCompositionRunner, key: str, seen: list[SourceCandidate]
    ) -> None:
        self.runner = runner
        self.key = key
        self.seen = seen  # every candidate (facts, hints, routes) the Strategy was shown

    async def __aenter__(self) -> _Harness:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.runner.dispose()

    async def begin_turn(self, scope: Mapping[str, Any]) -> RunnerTurn:
        return await self.runner.begin_turn({"scope": scope})

    def client(self, scope: Mapping[str, Any]) -> Any:
        return self.runner.management_client(self.key, scope)

    def inspect(self) -> dict[str, Any]:
        return self.runner.inspect()


class SourceConformance:
    """The checks every Source must pass; subclass it and fill in the hooks below."""

    #: the plugin object to mount (a module or object with `apply(ctx)`)
    plugin: ClassVar[Any]
    #: two different scopes in which the Source is available
    scopes: ClassVar[tuple[Mapping[str, Any], Mapping[str, Any]]]
    #: a scope lacking what the Source needs, so its facts say `unavailable` (None: skip)
    unavailable_scope: ClassVar[Mapping[str, Any] | None] = None
    #: configuration keys holding secrets (dotted for nested ones, like "provider.token"),
    #: with values the suite adds to the configuration
    secrets: ClassVar[Mapping[str, str]] = {}
    #: (action id, input) pairs the Source must refuse, writing nothing
    invalid_writes: ClassVar[Sequence[Call]] = ()
    #: how many writers run at once in the concurrency check
    concurrent_writers: ClassVar[int] = 12
    #: the per-read deadline of the runner
    source_timeout: ClassVar[float] = 20.0

    # ------------------------------------------------------------------ hooks

    def configure(self, directory: Path) -> Mapping[str, Any]:
        """Configuration for a Source keeping its data under `directory`."""
        raise NotImplementedError

    def write(self, marker: str) -> Call:
        """(action id, input) that stores `marker` so it can be found again."""
        raise NotImplementedError

    def query(self, marker: str) -> Call | None:
        """(route id, input) whose evidence contains `marker` once written, or None."""
        return None

    def manage_read(self, marker: str) -> Call | None:
        """(management operation, input) whose output contains `marker`, or None."""
        return None

    def manage_write(self, marker: str) -> Call | None:
        """(management operation, input) that stores `marker`, revision-fenced, or None."""
        return None

    def write_for_agent(self, marker: str) -> Call | None:
        """(action id, input) storing `marker` as the agent's own data, or None if it has none.

        Data described to an agent as its own (notes, scratch memory) is partitioned by
        `agent_id` when the scope has one; return None when the Source keeps no such data.
        """
        return None

    # ------------------------------------------------------------------ machinery

    def _config(self, directory: Path) -> dict[str, Any]:
        config = dict(self.configure(directory))
        for path, secret in self.secrets.items():
            # a dotted key ("provider.token") places the secret in a nested object
            *parents, leaf = path.split(".")
            target = config
            for name in parents:
                target[name] = dict(target.get(name) or {})
                target = target[name]
            target[leaf] = secret
        return config

    async def _contents(self, harness: _Harness, scope: Mapping[str, Any]) -> tuple[Any, ...]:
        """What a write would change: the revision and, if readable, the management view."""
        client = harness.client(scope)
        reading = self.manage_read(_marker())
        listed = await client.read(*reading) if reading is not None else None
        return await client.revision(), orjson.dumps(listed, option=orjson.OPT_SORT_KEYS)

    async def _runner(
        self, directory: Path, *, entries: Sequence[str] = ("subject",), **probe: Any
    ) -> _Harness:
        runner = MemoryCompositionRunner(source_timeout=self.source_timeout)
        try:
            for entry in entries:
                await runner.mount(self.plugin, instance_id=entry, config=self._config(directory))
            key = f"source:{entries[0]}"
            strategy = SelectAll()
            settings = {"source_keys": [key], "required": True, **probe}
            await runner.mount(strategy, instance_id="conformance", config=settings)
        except BaseException:
            await runner.dispose()
            raise
        return _Harness(runner, key, strategy.seen)

    async def _write(
        self, turn: RunnerTurn, marker: str, observer: _Observer | None = None
    ) -> None:
        action, payload = self.write(marker)
        key = _source_key(turn.view)
        receipt = await turn.execute_action(f"{key}/{action}", payload, _allow)
        if observer is not None:
            observer.add(receipt)
        assert receipt.status == "succeeded", (
            f"writing a marker through {action!r} did not succeed: {receipt.completion}"
        )

    async def _write_as(
        self, harness: _Harness, scope: Mapping[str, Any], marker: str, call: Call | None = None
    ) -> None:
        action, payload = call or self.write(marker)
        turn = await harness.begin_turn(scope)
        try:
            key = _source_key(turn.view)
            receipt = await turn.execute_action(f"{key}/{action}", payload, _allow)
        finally:
            await turn.release()
        assert receipt.status == "succeeded", (
            f"writing a marker through {action!r} in scope {dict(scope)} did not succeed: "
            f"{receipt.completion}"
        )

    async def _partitions_are_separate(
        self,
        harness: _Harness,
        first: Mapping[str, Any],
        second: Mapping[str, Any],
        call: Any = None,
    ) -> None:
        """Each of two scopes sees its own write, never the other's, on any path."""
        for writer, reader in ((first, second), (second, first)):
            marker = _marker()
            await self._write_as(harness, writer, marker, call(marker) if call else None)
            assert await self._visible(harness, writer, marker), (
                f"a marker written in scope {dict(writer)} must be findable in that scope"
            )
            leaked = await self._visible(harness, reader, marker)
            assert not leaked, (
                f"the Source must keep scope {dict(writer)} and scope {dict(reader)} apart, "
                f"but a marker written in the first shows in the second via {leaked}"
            )

    async def _visible(
        self,
        harness: _Harness,
        scope: Mapping[str, Any],
        marker: str,
        observer: _Observer | None = None,
    ) -> list[str]:
        """Every path (projection, query, management) on which `marker` shows in `scope`."""
        paths = []
        turn = await harness.begin_turn(scope)
        try:
            view = turn.view
            if observer is not None:
                observer.add(view)
            if any(marker in fragment.text for fragment in view.fragments):
                paths.append("project")
            found = self.query(marker)
            if found is not None and view.routes:
                route, payload = found
                evidence = await turn.execute_route(f"{_source_key(view)}/{route}", payload)
                if observer is not None:
                    observer.add(evidence)
                if marker in evidence.model_dump_json():
                    paths.append("query")
        finally:
            await turn.release()
        reading = self.manage_read(marker)
        if reading is not None:
            operation, payload = reading
            output = await harness.client(scope).read(operation, payload)
            if observer is not None:
                observer.add(output)
            if marker in orjson.dumps(output).decode():
                paths.append("manage")
        return paths

    # ------------------------------------------------------------------ checks

    async def test_facts_agree_with_the_manifest(self, tmp_path: Path) -> None:
        """Facts in every scope stay within the manifest (the core rejects any contradiction)."""
        async with await self._runner(tmp_path) as runner:
            for scope in self.scopes:
                turn = await runner.begin_turn(scope)
                assert turn.view.consistency, f"the Source is not available in scope {scope}"
                await turn.release()

    async def test_projections_respect_max_characters_and_mode(self, tmp_path: Path) -> None:
        """Every projection fits the characters allotted and uses the requested mode."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            turn = await runner.begin_turn(self.scopes[0])
            await self._write(turn, marker)
            await turn.release()
        for mode in ("eager", "routed"):
            for limit in (0, 1, 7, 64, 4_000):
                async with await self._runner(tmp_path, mode=mode, max_characters=limit) as runner:
                    try:
                        turn = await runner.begin_turn(self.scopes[0])
                    except CompositionRejected as exc:
                        raise AssertionError(f"projection ({mode}, {limit} chars): {exc}") from exc
                    fragments = turn.view.fragments
                    await turn.release()
                assert sum(len(f.text) for f in fragments) <= limit
                assert all(f.mode == mode for f in fragments)

    async def test_a_grant_exists_when_routes_are_selected(self, tmp_path: Path) -> None:
        """Selecting routes without a projection still yields a pinned grant."""
        async with await self._runner(tmp_path, project=False) as runner:
            try:
                turn = await runner.begin_turn(self.scopes[0])
            except CompositionRejected as exc:
                raise AssertionError(f"routes without projection: {exc}") from exc
            if turn.view.routes:
                assert [g.source_key for g in turn.view.grants] == [_source_key(turn.view)]
            await turn.release()

    async def test_scope_isolation_on_every_path(self, tmp_path: Path) -> None:
        """A write under one scope is never returned under another, on any path."""
        first, second = self.scopes
        mine, theirs = _marker(), _marker()
        async with await self._runner(tmp_path) as runner:
            turn = await runner.begin_turn(first)
            await self._write(turn, mine)
            await turn.release()
            seen = await self._visible(runner, first, mine)
            assert seen, (
                "a written marker must be findable in its own scope (project, query or manage)"
            )
            leaked = await self._visible(runner, second, mine)
            assert not leaked, (
                f"a marker written under {first} is visible under {second} via {leaked}"
            )
            turn = await runner.begin_turn(second)
            await self._write(turn, theirs)
            await turn.release()
            leaked = await self._visible(runner, first, theirs)
            assert not leaked, (
                f"a marker written under {second} is visible under {first} via {leaked}"
            )
            assert await self._visible(runner, first, mine), "a write in another scope hid ours"
            writing = self.manage_write(_marker())
            if writing is not None:
                marker = _marker()
                operation, payload = self.manage_write(marker) or writing
                client = runner.client(second)
                await client.mutate(
                    operation, payload, confirmed=True, expected_revision=await client.revision()
                )
                leaked = await self._visible(runner, first, marker)
                assert not leaked, f"a management write under {second} shows under {first}"

    async def test_the_same_user_in_two_tenants_is_two_partitions(self, tmp_path: Path) -> None:
        """The tenant is always part of the partition when the scope carries one."""
        base = {key: value for key, value in self.scopes[0].items() if key != "tenant_id"}
        async with await self._runner(tmp_path) as runner:
            await self._partitions_are_separate(
                runner,
                {**base, "tenant_id": "conformance-acme"},
                {**base, "tenant_id": "conformance-globex"},
            )

    async def test_no_tenant_and_a_tenant_are_two_partitions(self, tmp_path: Path) -> None:
        """A scope without a tenant never falls back to, or shows, a tenant's data."""
        base = {key: value for key, value in self.scopes[0].items() if key != "tenant_id"}
        async with await self._runner(tmp_path) as runner:
            await self._partitions_are_separate(
                runner, base, {**base, "tenant_id": "conformance-acme"}
            )

    async def test_agent_private_data_is_partitioned_by_agent(self, tmp_path: Path) -> None:
        """Data an agent is told is its own is never another agent's, nor agent-less."""
        if self.write_for_agent(_marker()) is None:
            pytest.skip("the Source keeps no agent-private data (write_for_agent is None)")
        base = {key: value for key, value in self.scopes[0].items() if key != "agent_id"}
        planner = {**base, "agent_id": "conformance-planner"}
        coder = {**base, "agent_id": "conformance-coder"}
        async with await self._runner(tmp_path) as runner:
            for first, second in ((planner, coder), (planner, base)):
                await self._partitions_are_separate(runner, first, second, self.write_for_agent)

    async def test_a_scope_missing_its_ids_is_unavailable(self, tmp_path: Path) -> None:
        """Without the scope ids it needs, the Source says `unavailable` and never widens."""
        if self.unavailable_scope is None:
            return
        marker = _marker()
        async with await self._runner(tmp_path, required=False) as runner:
            turn = await runner.begin_turn(self.scopes[0])
            await self._write(turn, marker)
            await turn.release()
            turn = await runner.begin_turn(self.unavailable_scope)
            view = turn.view
            await turn.release()
        assert view.consistency == (), "the Source was selected in a scope it cannot serve"
        assert marker not in view.model_dump_json()
        assert not [d for d in view.diagnostics if d.code.endswith("-failed")], (
            "a missing scope id must make facts say unavailable, not fail"
        )

    async def test_two_instances_are_isolated(self, tmp_path: Path) -> None:
        """Two entries of the Source with the same configuration keep separate data."""
        marker = _marker()
        async with await self._runner(tmp_path, entries=("one", "two")) as runner:
            turn = await runner.begin_turn(self.scopes[0])
            await self._write(turn, marker)
            await turn.release()
            assert await self._visible(runner, self.scopes[0], marker)
        async with await self._runner(tmp_path, entries=("two", "one")) as runner:
            leaked = await self._visible(runner, self.scopes[0], marker)
        assert not leaked, f"a marker written through entry 'one' shows through 'two' via {leaked}"

    async def test_durable_data_survives_unmount_and_remount(self, tmp_path: Path) -> None:
        """What was written is there again after the entry is unmounted and mounted."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            turn = await runner.begin_turn(self.scopes[0])
            await self._write(turn, marker)
            await turn.release()
        async with await self._runner(tmp_path) as runner:
            found = await self._visible(runner, self.scopes[0], marker)
        assert found, "a committed write did not survive unmount and remount"

    async def test_stale_expected_revisions_are_rejected(self, tmp_path: Path) -> None:
        """A fenced management write with a revision that is not current is refused.

        For an `exact-snapshot` Source the revision before a write is stale after it; for a
        `namespace-pinned-live-read` one the revision names the namespaces, so another
        scope's revision is the stale one. A made-up revision is refused by both.
        """
        if self.manage_write(_marker()) is None:
            return
        scope, other = self.scopes
        async with await self._runner(tmp_path) as runner:
            client = runner.client(scope)
            turn = await runner.begin_turn(scope)
            consistency = turn.view.consistency[0].consistency if turn.view.consistency else ""
            await turn.release()
            before = await client.revision()
            operation, payload = self.manage_write(_marker()) or ("", {})
            await client.mutate(operation, payload, confirmed=True, expected_revision=before)
            stale = _marker()
            operation, payload = self.manage_write(stale) or ("", {})
            outdated = [before]
            if consistency == "namespace-pinned-live-read":
                outdated = [await runner.client(other).revision()]
                assert outdated[0] != await client.revision(), (
                    "two scopes report the same namespace revision"
                )
            for revision in (*outdated, "conformance-stale-revision"):
                try:
                    await client.mutate(
                        operation, payload, confirmed=True, expected_revision=revision
                    )
                except RevisionConflict:
                    continue
                raise AssertionError(f"a fenced write with revision {revision!r} was accepted")
            assert not await self._visible(runner, scope, stale)

    async def test_bad_inputs_get_a_clear_error_and_write_nothing(self, tmp_path: Path) -> None:
        """Each refused write raises a clear error and changes nothing a reader could see."""
        scope = self.scopes[0]
        async with await self._runner(tmp_path) as runner:
            turn = await runner.begin_turn(scope)
            await self._write(turn, _marker())
            await turn.release()
            before = await self._contents(runner, scope)
            for action, payload in self.invalid_writes:
                turn = await runner.begin_turn(scope)
                try:
                    await turn.execute_action(f"{_source_key(turn.view)}/{action}", payload, _allow)
                except ActionError as exc:
                    _check_refusal(exc, payload)
                else:
                    raise AssertionError(f"{action} accepted the invalid input {payload!r}")
                finally:
                    await turn.release()
            assert await self._contents(runner, scope) == before, "a refused write changed data"

    async def test_concurrent_writers_lose_nothing(self, tmp_path: Path) -> None:
        """Many writers at once: every write is found afterwards."""
        markers = [_marker() for _ in range(self.concurrent_writers)]
        scope = self.scopes[0]
        async with await self._runner(tmp_path) as runner:
            turn = await runner.begin_turn(scope)

            async def write(marker: str) -> None:
                await self._write(turn, marker)

            async with anyio.create_task_group() as group:
                for marker in markers:
                    group.start_soon(write, marker)
            await turn.release()
            lost = [m for m in markers if not await self._visible(runner, scope, m)]
        assert not lost, f"{len(lost)} of {len(markers)} concurrent writes were lost"

    async def test_secrets_never_appear(self, tmp_path: Path) -> None:
        """Configured secrets never show anywhere the suite can look.

        That is facts, projections, evidence, receipts, diagnostics, reports and management
        output.
        """
        if not self.secrets:
            return
        observer = _Observer()
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            for scope in self.scopes:
                turn = await runner.begin_turn(scope)
                observer.add(turn.view)
                await self._write(turn, marker, observer)
                await turn.release()
                await self._visible(runner, scope, marker, observer)
            for action, payload in self.invalid_writes:
                turn = await runner.begin_turn(self.scopes[0])
                try:
                    await turn.execute_action(f"{_source_key(turn.view)}/{action}", payload, _allow)
                except MnemonError as exc:
                    observer.add(exc)
                    observer.add(getattr(exc, "receipt", None))
                finally:
                    await turn.release()
            for route in turn.view.routes:
                turn = await runner.begin_turn(self.scopes[0])
                try:
                    observer.add(await turn.execute_route(route.id, {"unexpected": True}))
                except RouteError as exc:
                    observer.add(exc)
                finally:
                    await turn.release()
            observer.add(runner.inspect())
            for candidate in runner.seen:
                observer.add(candidate)
            try:
                observer.add(await runner.client(self.scopes[0]).revision())
            except ManagementError as exc:
                observer.add(exc)
        everything = "\n".join(observer.texts)
        for key, secret in self.secrets.items():
            assert secret not in everything, f"the secret in configuration {key!r} leaked"


def _marker() -> str:
    return f"mnemon-marker-{next(_counter)}-{uuid.uuid4().hex[:12]}"


def _source_key(view: View) -> str:
    if view.consistency:
        return view.consistency[0].source_key
    raise AssertionError("the Source is not in the View")


def _check_refusal(error: ActionError, payload: Mapping[str, Any]) -> None:
    receipt = error.receipt
    completion = getattr(receipt, "completion", None)
    if receipt is not None and completion != "failed":
        raise AssertionError(
            f"refusing {payload!r} must say nothing was written, not {completion!r}"
        )
    if not str(error):
        raise AssertionError("the error must say what is wrong")
