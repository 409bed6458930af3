"""The Source conformance suite: what every Source author runs on their Source.

Subclass `SourceConformance` in a test module named like `Test...`, say how to configure
the Source on a temporary directory, which scopes to try, and how to place and find a
marker; pytest then runs every check against real compositions::

    class TestMySource(SourceConformance):
        plugin = my_plugin
        scopes = ({"user_id": "u1"}, {"user_id": "u2"})

        def configure(self, directory):
            return {"data_dir": str(directory)}

        def write(self, marker):
            return "remember", {"text": marker}

        def query(self, marker):
            return "recall", {"query": marker}

A marker is placed through `write()` (an action the model may be offered) or, for a
read-mostly Source that offers no generic write, through an overridden `seed()` that puts
it straight into the Source's data (a file in its folder, a row in its database).

Every check states in its failure message what the Source must do. A check that does not
apply to a Source (no routes, no secrets, no write) is skipped with its reason, never
reported as passed.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import anyio
import orjson
import pytest
from blockbuster import BlockBuster, BlockingError

from mnemon import (
    ActionError,
    CompositionRejected,
    ManagementError,
    MnemonError,
    RevisionConflict,
    RouteError,
    View,
    render_wake,
)
from mnemon.sdk import SourceCandidate

from ._interleave import InterleavingProbe
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
    """A runner with the Source under test mounted, that Source's key and its directory."""

    def __init__(
        self,
        runner: MemoryCompositionRunner,
        key: str,
        seen: list[SourceCandidate],
        directory: Path,
    ) -> None:
        self.runner = runner
        self.key = key
        self.seen = seen  # every candidate (facts, hints, routes) the Strategy was shown
        self.directory = directory

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


class _BlockingCalls(logging.Handler):
    """Collects the blocking calls detected inside a Source's failing `facts`/`project`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.calls: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, BlockingError):
                self.calls.append(str(error))
                return
            error = error.__cause__ or error.__context__


class SourceConformance:
    """The checks every Source must pass; subclass it and fill in the hooks below."""

    #: the plugin object to mount (a module or object with `apply(ctx)`)
    plugin: ClassVar[Any]
    #: two different scopes in which the Source is available
    scopes: ClassVar[tuple[Mapping[str, Any], Mapping[str, Any]]]
    #: a scope lacking what the Source needs, so its facts say `unavailable` (None: skipped)
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
    #: why two entries with the same configuration read the same data on purpose, or None.
    #: A Source over a file the user names (`{"path": "~/notes.md"}`) serves that file to
    #: every entry pointing at it; say so here and the instance check is skipped with this
    #: reason. Sources that keep their own data under a folder must leave it None.
    shared_data_reason: ClassVar[str | None] = None
    #: the modules whose code must not block the event loop (default: the plugin's package)
    source_modules: ClassVar[Sequence[str]] = ()

    # ------------------------------------------------------------------ hooks

    def configure(self, directory: Path) -> Mapping[str, Any]:
        """Configuration for a Source keeping its data under `directory`."""
        raise NotImplementedError

    def write(self, marker: str) -> Call | None:
        """(action id, input) that stores `marker` so it can be found again, or None.

        Return None for a read-mostly Source that offers no generic write, and override
        `seed()` instead; the checks that need the model's write are then skipped.
        """
        return None

    async def seed(self, directory: Path, scope: Mapping[str, Any], marker: str) -> None:
        """Put `marker` into the Source's data for `scope` without the model's write.

        Override it for a read-mostly Source: write a file under `directory` (the folder
        `configure()` received), insert a row, call the Source's own import. The Source is
        mounted while this runs; the next turn must see the marker. By default the suite
        writes through `write()`.
        """
        raise NotImplementedError(
            "SourceConformance needs write() or seed() to place a marker in the Source"
        )

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

    def _seeds(self) -> bool:
        return type(self).seed is not SourceConformance.seed

    def _needs_write(self) -> Call:
        call = self.write(_marker())
        if call is None:
            pytest.skip("the Source offers the model no generic write (write() returns None)")
        return call

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
        self,
        directory: Path,
        *,
        entries: Sequence[str] = ("subject",),
        plugin: Any = None,
        **probe: Any,
    ) -> _Harness:
        runner = MemoryCompositionRunner(source_timeout=self.source_timeout)
        mounted = self.plugin if plugin is None else plugin
        try:
            for entry in entries:
                await runner.mount(mounted, instance_id=entry, config=self._config(directory))
            key = f"source:{entries[0]}"
            strategy = SelectAll()
            settings = {"source_keys": [key], "required": True, **probe}
            await runner.mount(strategy, instance_id="conformance", config=settings)
        except BaseException:
            await runner.dispose()
            raise
        return _Harness(runner, key, strategy.seen, directory)

    async def _begin(self, harness: _Harness, scope: Mapping[str, Any]) -> RunnerTurn:
        try:
            return await harness.begin_turn(scope)
        except CompositionRejected as exc:
            raise AssertionError(
                f"the Source must serve a View in scope {dict(scope)}: "
                f"the composition was rejected ({exc})"
            ) from exc

    async def _write(
        self, turn: RunnerTurn, marker: str, observer: _Observer | None = None
    ) -> None:
        call = self.write(marker)
        assert call is not None
        action, payload = call
        key = _source_key(turn.view)
        try:
            receipt = await turn.execute_action(f"{key}/{action}", payload, _allow)
        except MnemonError as exc:
            raise AssertionError(
                f"the write {action!r} given by write() must store a marker, but it was "
                f"refused ({type(exc).__name__} {getattr(exc, 'code', '')})"
            ) from exc
        if observer is not None:
            observer.add(receipt)
        assert receipt.status == "succeeded", (
            f"the write {action!r} given by write() must store a marker and say so, "
            f"but its receipt says {receipt.status}/{receipt.completion}"
        )

    async def _place(
        self,
        harness: _Harness,
        scope: Mapping[str, Any],
        marker: str,
        call: Call | None = None,
    ) -> None:
        """Put `marker` in `scope`: `call` or `write()` through a turn, else `seed()`."""
        if call is None and (self._seeds() or self.write(marker) is None):
            await self.seed(harness.directory, scope, marker)
            return
        action, payload = call or self.write(marker) or ("", {})
        turn = await self._begin(harness, scope)
        try:
            key = _source_key(turn.view)
            try:
                receipt = await turn.execute_action(f"{key}/{action}", payload, _allow)
            except MnemonError as exc:
                raise AssertionError(
                    f"the write {action!r} must store a marker in scope {dict(scope)}, "
                    f"but it was refused ({type(exc).__name__} {getattr(exc, 'code', '')})"
                ) from exc
        finally:
            await turn.release()
        assert receipt.status == "succeeded", (
            f"the write {action!r} must store a marker in scope {dict(scope)} and say so, "
            f"but its receipt says {receipt.status}/{receipt.completion}"
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
            await self._place(harness, writer, marker, call(marker) if call else None)
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
        turn = await self._begin(harness, scope)
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

    async def _found_in(self, turn: RunnerTurn, marker: str) -> list[str]:
        """Where `marker` shows in an open turn: its projection and, if any, its route."""
        paths = []
        if any(marker in fragment.text for fragment in turn.view.fragments):
            paths.append("project")
        found = self.query(marker)
        if found is not None and turn.view.routes:
            route, payload = found
            evidence = await turn.execute_route(f"{_source_key(turn.view)}/{route}", payload)
            if marker in evidence.model_dump_json():
                paths.append("query")
        return paths

    def _modules(self) -> list[str]:
        if self.source_modules:
            return list(self.source_modules)
        plugin = self.plugin
        name = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        return [name.partition(".")[0]]

    @contextmanager
    def _no_blocking(self) -> Iterator[_BlockingCalls]:
        """Blocking calls made on the event loop by the Source's own modules raise."""
        modules = [sys.modules[name] for name in self._modules() if name in sys.modules]
        calls = _BlockingCalls()
        logger = logging.getLogger("mnemon")
        level = logger.level
        logger.addHandler(calls)
        logger.setLevel(logging.DEBUG)
        buster = BlockBuster(modules)
        buster.activate()
        try:
            yield calls
        finally:
            buster.deactivate()
            logger.setLevel(level)
            logger.removeHandler(calls)

    # ------------------------------------------------------------------ checks

    async def test_facts_agree_with_the_manifest(self, tmp_path: Path) -> None:
        """Facts in every scope stay within the manifest (the core rejects any contradiction)."""
        async with await self._runner(tmp_path) as runner:
            for scope in self.scopes:
                turn = await self._begin(runner, scope)
                assert turn.view.consistency, (
                    f"the Source must be available in each of `scopes`, but in {dict(scope)} "
                    "its facts said it is not"
                )
                await turn.release()

    async def test_projections_respect_max_characters_and_mode(self, tmp_path: Path) -> None:
        """Every projection fits the characters allotted and uses the requested mode."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, self.scopes[0], marker)
        for mode in ("eager", "routed"):
            for limit in (0, 1, 7, 64, 4_000):
                async with await self._runner(tmp_path, mode=mode, max_characters=limit) as runner:
                    try:
                        turn = await runner.begin_turn(self.scopes[0])
                    except CompositionRejected as exc:
                        raise AssertionError(
                            f"a projection must fit the characters allotted and use the "
                            f"requested mode ({mode}, {limit} characters): {exc}"
                        ) from exc
                    fragments = turn.view.fragments
                    await turn.release()
                used = sum(len(f.text) for f in fragments)
                assert used <= limit, (
                    f"a projection must fit the {limit} characters allotted; it used {used}"
                )
                assert all(f.mode == mode for f in fragments), (
                    f"every fragment must carry the requested mode {mode!r}"
                )

    async def test_a_grant_exists_when_routes_are_selected(self, tmp_path: Path) -> None:
        """Selecting routes without a projection still yields a pinned grant."""
        async with await self._runner(tmp_path, project=False) as runner:
            try:
                turn = await runner.begin_turn(self.scopes[0])
            except CompositionRejected as exc:
                raise AssertionError(
                    "when only its routes are selected, project() must still return a read "
                    f"grant for them: {exc}"
                ) from exc
            routes, grants = turn.view.routes, turn.view.grants
            await turn.release()
        if not routes:
            pytest.skip("the Source offers no routes, so there is no grant to pin")
        assert [g.source_key for g in grants] == [_source_key(turn.view)], (
            "when its routes are selected, the Source must pin exactly one read grant"
        )

    async def test_routes_read_only_what_their_grant_pinned(self, tmp_path: Path) -> None:
        """An exact-snapshot route reads its grant's snapshot, never the live data."""
        if self.query(_marker()) is None:
            pytest.skip("no route to check: query() returns None")
        scope = self.scopes[0]
        before, later = _marker(), _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, scope, before)
            turn = await self._begin(runner, scope)
            try:
                consistency = turn.view.consistency[0].consistency
                if not turn.view.routes:
                    pytest.skip("the Source offered no routes in this scope")
                if consistency == "namespace-pinned-live-read":
                    pytest.skip("a namespace-pinned-live-read Source reads live data by design")
                await self._place(runner, scope, later)
                assert "query" in await self._found_in(turn, before), (
                    "a route must find what was written before its turn began"
                )
                assert "query" not in await self._found_in(turn, later), (
                    "an exact-snapshot route must read only what its read grant pinned, but it "
                    "returned data written after the turn began (it reads live data)"
                )
            finally:
                await turn.release()

    async def test_concurrent_scopes_never_share_a_snapshot(self, tmp_path: Path) -> None:
        """Turns of two scopes, their calls interleaved, each see their own data on every path.

        The suite holds each turn's `project` until the other scope's `facts` has run, so the
        Source is called `facts(A), facts(B), project(A), project(B)` with both turns open,
        then both turns read their routes. A Source that keeps one mutable "last snapshot"
        (set by `facts` or `project`, read by `project` or `query`) shows one scope the other's
        data or pins the other's revision.
        """
        first, second = self.scopes
        mine, theirs = _marker(), _marker()
        probe = InterleavingProbe()
        async with await self._runner(tmp_path, plugin=probe.plugin(self.plugin)) as runner:
            await self._place(runner, first, mine)
            await self._place(runner, second, theirs)
            for order in ((first, second), (second, first)):
                turns, rejected = await self._interleaved_turns(runner, probe, order)
                try:
                    for index, scope in enumerate(order):
                        other = mine if scope is second else theirs
                        _check_interleaved_projection(probe, runner.key, order, index, other)
                        if index in rejected:
                            raise AssertionError(
                                f"the Source must serve a View in scope {dict(scope)} while a "
                                f"turn in scope {dict(order[1 - index])} is composed (facts() "
                                "of both ran before either project()), but the composition "
                                f"was rejected ({rejected[index]})"
                            )
                    if self.query(mine) is None and not any(
                        turn.view.fragments for turn in turns.values()
                    ):
                        pytest.skip("the Source shows data neither in projections nor by query()")
                    for index, scope in enumerate(order):
                        own, other = (mine, theirs) if scope is first else (theirs, mine)
                        assert await self._found_in(turns[index], own), (
                            f"a turn in scope {dict(scope)} must see its own data while a turn "
                            "in another scope is open; keep snapshots per request"
                        )
                        leaked = await self._found_in(turns[index], other)
                        assert not leaked, (
                            f"a turn in scope {dict(scope)} must never see another scope's "
                            f"data, but it did via {leaked} while both turns were open: keep "
                            "each request's snapshot in the request and its grant, never in "
                            "one shared 'last snapshot'"
                        )
                finally:
                    for turn in turns.values():
                        await turn.release()

    async def _interleaved_turns(
        self, harness: _Harness, probe: InterleavingProbe, order: Sequence[Mapping[str, Any]]
    ) -> tuple[dict[int, RunnerTurn], dict[int, CompositionRejected]]:
        """A turn per scope of `order`, every `facts` called before the first `project`.

        Returns the turns begun and the compositions rejected, by position in `order`.
        """
        probe.reset()
        holds = [probe.hold(harness.key, scope) for scope in order]
        ended = [anyio.Event() for _ in order]
        turns: dict[int, RunnerTurn] = {}
        rejected: dict[int, CompositionRejected] = {}

        async def begin(index: int, scope: Mapping[str, Any]) -> None:
            try:
                turns[index] = await harness.begin_turn(scope)
            except CompositionRejected as exc:
                rejected[index] = exc
            finally:
                holds[index].reached.set()  # a turn that never called project() holds nothing
                ended[index].set()

        try:
            async with anyio.create_task_group() as group:
                for index, scope in enumerate(order):
                    group.start_soon(begin, index, scope)
                    await holds[index].reached.wait()  # its facts() ran; its project() waits
                for index, hold in enumerate(holds):
                    hold.release()
                    await ended[index].wait()
        except BaseException:
            for turn in turns.values():
                await turn.release()
            raise
        finally:
            probe.release_all()
        return turns, rejected

    async def test_facts_and_project_never_block_the_event_loop(self, tmp_path: Path) -> None:
        """`facts` and `project` await their I/O; blocking calls go through `run_blocking`."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, self.scopes[0], marker)
            for scope in self.scopes:
                turn = await self._begin(runner, scope)
                await turn.release()
                with self._no_blocking() as detected:
                    try:
                        turn = await runner.begin_turn(scope)
                    except CompositionRejected:
                        view = None
                    else:
                        view = turn.view
                        await turn.release()
                assert view is not None or detected.calls, (
                    f"the Source must serve a View in scope {dict(scope)}, but it was rejected"
                )
                assert not detected.calls, (
                    "facts() and project() must not block the event loop: run blocking work "
                    "(files, sqlite3, sockets, sleep) with `await mnemon.sdk.run_blocking(...)`; "
                    f"detected {sorted(set(detected.calls))}"
                )

    async def test_facts_and_project_write_nothing(self, tmp_path: Path) -> None:
        """Composing Views creates, changes and removes no file, and moves no revision."""
        async with await self._runner(tmp_path) as runner:
            for scope in self.scopes:
                await self._place(runner, scope, _marker())
            # a first round may still open stores that reads keep using afterwards
            await self._revisions(runner)
            before, files = await self._revisions(runner), _tree(tmp_path)
            await self._revisions(runner)
            after = await self._revisions(runner)
            changed = _changes(files, _tree(tmp_path))
        assert not changed, (
            f"facts() and project() must not write: composing Views changed {changed}"
        )
        assert after == before, (
            "facts() and project() must not change the Source's state: its revision moved "
            f"from {before} to {after} without a write"
        )

    async def _revisions(self, harness: _Harness) -> list[str | None]:
        revisions: list[str | None] = []
        for scope in self.scopes:
            turn = await self._begin(harness, scope)
            revisions.extend(c.revision for c in turn.view.consistency)
            await turn.release()
        return revisions

    async def test_no_storage_path_or_file_name_in_the_view_or_wake(self, tmp_path: Path) -> None:
        """The projection and the Wake never show where or how the Source stores data."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, self.scopes[0], marker)
        for mode in ("eager", "routed"):
            async with await self._runner(tmp_path, mode=mode) as runner:
                turn = await self._begin(runner, self.scopes[0])
                shown = turn.view.model_dump_json() + "\n" + render_wake(turn.view)
                await turn.release()
            names = _storage_names(tmp_path)
            found = sorted(name for name in names if name in shown)
            assert not found, (
                "the projection and the Wake must not show storage paths or file names "
                f"(the model must not learn where data lives); the {mode} View shows {found}"
            )

    async def test_scope_isolation_on_every_path(self, tmp_path: Path) -> None:
        """A write under one scope is never returned under another, on any path."""
        first, second = self.scopes
        mine, theirs = _marker(), _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, first, mine)
            seen = await self._visible(runner, first, mine)
            assert seen, (
                "a marker written in a scope must be findable in that scope "
                "(through project, query or manage)"
            )
            leaked = await self._visible(runner, second, mine)
            assert not leaked, (
                f"the Source must never return data of one scope in another: a marker written "
                f"under {dict(first)} is visible under {dict(second)} via {leaked}"
            )
            await self._place(runner, second, theirs)
            leaked = await self._visible(runner, first, theirs)
            assert not leaked, (
                f"the Source must never return data of one scope in another: a marker written "
                f"under {dict(second)} is visible under {dict(first)} via {leaked}"
            )
            assert await self._visible(runner, first, mine), (
                "a write in one scope must not hide data of another scope"
            )
            if self.manage_write(_marker()) is not None:
                marker = _marker()
                operation, payload = self.manage_write(marker) or ("", {})
                client = runner.client(second)
                await client.mutate(
                    operation, payload, confirmed=True, expected_revision=await client.revision()
                )
                leaked = await self._visible(runner, first, marker)
                assert not leaked, (
                    "management writes must keep to their scope too: a write under "
                    f"{dict(second)} shows under {dict(first)} via {leaked}"
                )

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
            pytest.skip("no scope the Source cannot serve was given (unavailable_scope is None)")
        marker = _marker()
        async with await self._runner(tmp_path, required=False) as runner:
            await self._place(runner, self.scopes[0], marker)
            turn = await runner.begin_turn(self.unavailable_scope)
            view = turn.view
            await turn.release()
        assert view.consistency == (), (
            f"the Source must report `unavailable` in scope {dict(self.unavailable_scope)}, "
            "which lacks the ids it needs, but it was served"
        )
        assert marker not in view.model_dump_json(), (
            "a Source missing the ids it needs must never widen to other data"
        )
        assert not [d for d in view.diagnostics if d.code.endswith("-failed")], (
            "a missing scope id must make facts() say unavailable, not raise"
        )

    async def test_each_declared_partition_key_is_needed(self, tmp_path: Path) -> None:
        """Each scope id the Source declares (`partition_keys`) is one it cannot serve without.

        Tools tell a person which identity to add from this declaration (the CLI's
        `--workspace`), so the first of `scopes` without any one of them must find the Source
        `unavailable` with reason `missing-scope`.
        """
        async with await self._runner(tmp_path, required=False) as runner:
            serving = runner.inspect().get("serving") or {}
            declared = next(
                item["partition_keys"]
                for item in serving.get("sources", [])
                if item["key"] == runner.key
            )
            if not declared:
                pytest.skip("the Source declares no partition_keys")
            for name in declared:
                scope = {key: value for key, value in self.scopes[0].items() if key != name}
                turn = await runner.begin_turn(scope)
                view = turn.view
                await turn.release()
                mine = [d.message for d in view.diagnostics if d.key == runner.key]
                served = view.consistency != () or not any("missing-scope" in m for m in mine)
                assert not served, (
                    f"the Source declares partition_keys {list(declared)}, so in scope "
                    f"{scope} (without {name}) its facts must say unavailable with reason "
                    "missing-scope; declare only the scope ids it cannot serve without"
                )

    async def test_two_instances_are_isolated(self, tmp_path: Path) -> None:
        """Two entries of the Source with the same configuration keep separate data.

        A Source keeping data under a folder must give each entry its own place in it
        (`mnemon.sdk.source_data_directory` does). A Source over a file the user names shares it
        on purpose: it sets `shared_data_reason`, and this check is skipped with that reason.
        """
        if self.shared_data_reason:
            pytest.skip(self.shared_data_reason)
        if self._seeds() or self.write(_marker()) is None:
            pytest.skip("seeded data is not written through one entry (the Source uses seed())")
        marker = _marker()
        async with await self._runner(tmp_path, entries=("one", "two")) as runner:
            await self._place(runner, self.scopes[0], marker)
            assert await self._visible(runner, self.scopes[0], marker), (
                "a marker written through an entry must be findable through it"
            )
        async with await self._runner(tmp_path, entries=("two", "one")) as runner:
            leaked = await self._visible(runner, self.scopes[0], marker)
        assert not leaked, (
            "two entries with the same configuration must keep separate data (or set "
            "shared_data_reason), but a marker written through entry 'one' shows through "
            f"'two' via {leaked}"
        )

    async def test_durable_data_survives_unmount_and_remount(self, tmp_path: Path) -> None:
        """What was written is there again after the entry is unmounted and mounted."""
        marker = _marker()
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, self.scopes[0], marker)
        async with await self._runner(tmp_path) as runner:
            found = await self._visible(runner, self.scopes[0], marker)
        assert found, "a committed write must survive unmount and remount, but it did not survive"

    async def test_stale_expected_revisions_are_rejected(self, tmp_path: Path) -> None:
        """A fenced management write with a revision that is not current is refused.

        For an `exact-snapshot` Source the revision before a write is stale after it; for a
        `namespace-pinned-live-read` one the revision names the namespaces, so another
        scope's revision is the stale one. A made-up revision is refused by both.
        """
        if self.manage_write(_marker()) is None:
            pytest.skip("the Source has no management write (manage_write() returns None)")
        scope, other = self.scopes
        async with await self._runner(tmp_path) as runner:
            client = runner.client(scope)
            turn = await self._begin(runner, scope)
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
                    "the revisions of two scopes' namespaces must differ, but they are the same"
                )
            for revision in (*outdated, "conformance-stale-revision"):
                try:
                    await client.mutate(
                        operation, payload, confirmed=True, expected_revision=revision
                    )
                except RevisionConflict:
                    continue
                raise AssertionError(
                    "a fenced management write must be refused with RevisionConflict when its "
                    f"expected revision is not current, but {revision!r} was accepted"
                )
            assert not await self._visible(runner, scope, stale), (
                "a refused fenced write must store nothing"
            )

    async def test_bad_inputs_get_a_clear_error_and_write_nothing(self, tmp_path: Path) -> None:
        """Each refused write raises a clear error and changes nothing a reader could see."""
        self._needs_write()
        if not self.invalid_writes:
            pytest.skip("no invalid inputs were given (invalid_writes is empty)")
        scope = self.scopes[0]
        async with await self._runner(tmp_path) as runner:
            await self._place(runner, scope, _marker())
            before = await self._contents(runner, scope)
            for action, payload in self.invalid_writes:
                turn = await self._begin(runner, scope)
                try:
                    await turn.execute_action(f"{_source_key(turn.view)}/{action}", payload, _allow)
                except ActionError as exc:
                    _check_refusal(exc, payload)
                else:
                    raise AssertionError(
                        f"the Source must refuse invalid input, but {action} accepted the "
                        f"invalid input {payload!r}"
                    )
                finally:
                    await turn.release()
            assert await self._contents(runner, scope) == before, (
                "a refused write must change nothing, but the data changed"
            )

    async def test_concurrent_writers_lose_nothing(self, tmp_path: Path) -> None:
        """Many writers at once: every write is found afterwards."""
        self._needs_write()
        markers = [_marker() for _ in range(self.concurrent_writers)]
        scope = self.scopes[0]
        async with await self._runner(tmp_path) as runner:
            turn = await self._begin(runner, scope)

            async def write(marker: str) -> None:
                await self._write(turn, marker)

            async with anyio.create_task_group() as group:
                for marker in markers:
                    group.start_soon(write, marker)
            await turn.release()
            lost = [m for m in markers if not await self._visible(runner, scope, m)]
        assert not lost, (
            "writes running at the same time must all be kept, but "
            f"{len(lost)} of {len(markers)} concurrent writes were lost"
        )

    async def test_secrets_never_appear(self, tmp_path: Path) -> None:
        """Configured secrets never show anywhere the suite can look.

        That is facts, projections, evidence, receipts, diagnostics, reports and management
        output.
        """
        if not self.secrets:
            pytest.skip("the Source takes no secrets (secrets is empty)")
        observer = _Observer()
        marker = _marker()
        writes = self.write(marker) is not None
        async with await self._runner(tmp_path) as runner:
            for scope in self.scopes:
                if not writes:
                    await self._place(runner, scope, marker)
                turn = await self._begin(runner, scope)
                observer.add(turn.view)
                observer.add(render_wake(turn.view))
                if writes:
                    await self._write(turn, marker, observer)
                await turn.release()
                await self._visible(runner, scope, marker, observer)
            for action, payload in self.invalid_writes:
                turn = await self._begin(runner, self.scopes[0])
                try:
                    await turn.execute_action(f"{_source_key(turn.view)}/{action}", payload, _allow)
                except MnemonError as exc:
                    observer.add(exc)
                    observer.add(getattr(exc, "receipt", None))
                finally:
                    await turn.release()
            for route in turn.view.routes:
                turn = await self._begin(runner, self.scopes[0])
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
            assert secret not in everything, (
                "secrets must never appear in facts, Views, evidence, receipts, errors or "
                f"reports, but the secret in configuration {key!r} leaked"
            )


def _marker() -> str:
    return f"mnemon-marker-{next(_counter)}-{uuid.uuid4().hex[:12]}"


def _source_key(view: View) -> str:
    if view.consistency:
        return view.consistency[0].source_key
    raise AssertionError("the Source must be available in this scope, but it is not in the View")


def _check_interleaved_projection(
    probe: InterleavingProbe,
    key: str,
    order: Sequence[Mapping[str, Any]],
    index: int,
    other_marker: str,
) -> None:
    """The projection of `order[index]`, made after the other scope's facts, is its own."""
    scope, other = order[index], order[1 - index]
    seen, theirs = probe.seen(key, scope), probe.seen(key, other)
    projection = seen.projection
    if projection is None:
        return
    assert not any(other_marker in fragment.text for fragment in projection.fragments), (
        f"project() in scope {dict(scope)} must show only that scope's data, but called after "
        f"facts() of scope {dict(other)} it showed that scope's data: keep the snapshot each "
        "request reads in that request (and its grant), never in one attribute that facts() "
        "sets and project() reads"
    )
    pinned = seen.facts.revision if seen.facts is not None else None
    if projection.revision is None or projection.revision == pinned:
        return
    whose = "another revision"
    if theirs.facts is not None and projection.revision == theirs.facts.revision:
        whose = f"the revision facts() reported for scope {dict(other)}"
    raise AssertionError(
        f"project() in scope {dict(scope)} must pin the revision its own facts() reported "
        f"({pinned!r}), but called after facts() of scope {dict(other)} it returned {whose} "
        f"({projection.revision!r}): keep each request's revision with its own snapshot, "
        "never in one attribute every request shares"
    )


def _tree(directory: Path) -> dict[str, str]:
    """Every file under `directory` with a digest of its content."""
    files = {}
    for path in sorted(directory.rglob("*")):
        # SQLite's shared-memory index is rewritten by readers, by design
        if path.is_file() and not path.name.endswith("-shm"):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            files[path.relative_to(directory).as_posix()] = digest
    return files


def _changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    created = [f"created {name}" for name in sorted(after.keys() - before.keys())]
    removed = [f"removed {name}" for name in sorted(before.keys() - after.keys())]
    changed = [
        f"changed {name}" for name in sorted(before.keys() & after.keys())
        if before[name] != after[name]
    ]  # fmt: skip
    return created + removed + changed


def _storage_names(directory: Path) -> set[str]:
    """The data folder's path and the names of the files in it (those with a suffix)."""
    names = {str(directory), str(directory.resolve())}
    for path in directory.rglob("*"):
        # a name without a suffix ("sources", "notes") is too likely to be an ordinary word
        if path.suffix and len(path.name) >= 5:
            names.add(path.name)
    return names


def _check_refusal(error: ActionError, payload: Mapping[str, Any]) -> None:
    receipt = error.receipt
    completion = getattr(receipt, "completion", None)
    if receipt is not None and completion != "failed":
        raise AssertionError(
            f"refusing {payload!r} must say nothing was written, not {completion!r}"
        )
    if not str(error):
        raise AssertionError("a refused write's error must say what is wrong")
