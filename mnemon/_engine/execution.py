"""Turn execution: route reads and authorized writes on a pinned View, with their policies."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

import anyio
import anyio.lowlevel
from pydantic import BaseModel

from .._awaited import awaited
from .._errors import (
    ActionError,
    MaintenanceError,
    MnemonError,
    RevisionConflict,
    RouteError,
    SourceError,
)
from .._json import FrozenDict
from .._models import (
    ActionOffer,
    Authorize,
    Evidence,
    EvidenceItem,
    EvidenceLimits,
    MaintenanceReport,
    MaintenanceTrigger,
    MutationReceipt,
    MutationRequest,
    PolicyRequest,
    QueryRequest,
    ReadGrant,
    ViewRef,
    ViewRoute,
    from_checked,
    validate_model,
)
from .assembly import PinnedView
from .checks import checked_input, source_failure
from .reads import call_source

__all__ = ["TurnExecution"]


class _Reader:
    """The `read` handed to a turn policy: bound to one route and its grant, then dead.

    Its siblings (other routes of the same View) share its life: they die with it.
    """

    __slots__ = ("_alive", "_ceilings", "_execution", "_grant", "_input", "_root", "_route")

    def __init__(
        self,
        execution: TurnExecution,
        route: ViewRoute,
        ceilings: ViewRoute,
        grant: ReadGrant,
        value: FrozenDict | None,
        root: _Reader | None = None,
    ) -> None:
        self._execution = execution
        self._route = route
        self._ceilings = ceilings
        self._grant = grant
        self._input = value
        self._root = self if root is None else root
        self._alive = True

    def close(self) -> None:
        self._alive = False

    def _check_alive(self, route_id: str) -> None:
        if not self._root._alive:
            raise RouteError(
                f"route {route_id!r}: the turn policy's read() was used after it returned",
                code="contract",
            )

    def sibling(self, route_id: str) -> _Reader:
        """A reader of another route of this View, through that route's own grant."""
        self._check_alive(self._route.id)
        view = self._execution._pinned.view
        route = view.route(route_id) or view.policy_route(route_id)
        if route is None:
            raise RouteError(f"route {route_id!r} is not in this View", code="unknown-route")
        grant = self._execution._pinned.grants.get(route.source_key)
        if grant is None:  # the core pins a grant for every selected route
            raise RouteError(f"route {route_id!r} has no pinned grant", code="contract")
        return _Reader(self._execution, route, route, grant, None, self._root)

    async def __call__(
        self,
        input: Mapping[str, Any] | None = None,
        limits: EvidenceLimits | Mapping[str, Any] | None = None,
    ) -> Evidence:
        route = self._route
        self._check_alive(route.id)
        value = self._input
        if input is not None or value is None:
            value = checked_input(
                route.input_schema,
                input,
                f"route {route.id!r} input",
                RouteError,
                max_bytes=self._execution._max_input_bytes,
            )
        ceilings = _narrowed(self._ceilings, limits, strict=True)
        return await self._execution._read(route, ceilings, self._grant, value)


def _narrowed(
    route: ViewRoute, limits: EvidenceLimits | Mapping[str, Any] | None, *, strict: bool
) -> ViewRoute:
    """`route` with ceilings narrowed by `limits`; never wider than what it already has."""
    if limits is None:
        return route
    checked = validate_model(
        EvidenceLimits, limits, subject=f"route {route.id!r} limits", error=RouteError
    )
    changes = {}
    for name in ("max_results", "max_characters", "max_item_characters"):
        wanted = getattr(checked, name)
        current = getattr(route, name)
        if wanted is None:
            continue
        if wanted > current and strict:
            raise RouteError(
                f"route {route.id!r} limits.{name}: {wanted} would widen the ceiling {current}",
                code="invalid-budget",
            )
        if wanted < current:
            changes[name] = wanted
    # one item is never longer than the whole read may be
    items = min(
        changes.get("max_item_characters", route.max_item_characters),
        changes.get("max_characters", route.max_characters),
    )
    if items != route.max_item_characters:
        changes["max_item_characters"] = items
    return BaseModel.model_copy(route, update=changes) if changes else route


def _normalized(evidence: Any, view_id: str, route: ViewRoute, ceilings: ViewRoute) -> Evidence:
    """Bind evidence to its View, route and Source, and omit whole items beyond the ceilings."""
    subject = f"route {route.id!r}"
    checked = validate_model(Evidence, evidence, subject=f"{subject} evidence", error=RouteError)
    bound = (checked.view_id, checked.route_id, checked.source_key)
    if bound != (view_id, route.id, route.source_key):
        raise RouteError(
            f"{subject}: evidence is bound to another View, route or Source", code="contract"
        )
    kept: list[EvidenceItem] = []
    used = 0
    for item in checked.items:
        size = len(item.text)
        if size > ceilings.max_item_characters:
            continue  # omitted whole: the Source owns excerpts, the core never clips
        if len(kept) < ceilings.max_results and used + size <= ceilings.max_characters:
            kept.append(item)
            used += size
    omitted = len(kept) != len(checked.items)
    if not omitted:
        return checked
    return BaseModel.model_copy(checked, update={"items": tuple(kept), "truncated": True})


class Maintainer(Protocol):
    """What runs maintenance for a turn (the engine's `run_maintenance`, handed in)."""

    def __call__(
        self,
        pinned: PinnedView,
        trigger: MaintenanceTrigger,
        authorize: Authorize,
        *,
        dry_run: bool = False,
        expected_plan: str | None = None,
    ) -> Awaitable[MaintenanceReport]:
        """Plan and run maintenance for `pinned`."""
        ...


class TurnExecution:
    """The reads and writes of one turn: its call ledger, its lazily made policy."""

    def __init__(self, pinned: PinnedView, maintainer: Maintainer | None = None) -> None:
        self._pinned = pinned
        # management and execution are separate planes: maintenance, which uses both, is
        # handed in by the host rather than imported here
        self._maintainer = maintainer
        self._ledger: dict[str, int] = {}
        self._policy: Any = None
        self._released = False
        # made at the first read or write: most turns of a busy host make neither
        self._view_ref: ViewRef | None = None
        self._lock: anyio.Lock | None = None
        # the maintenance runs of this turn, in order
        self.maintenance: list[MaintenanceReport] = []

    @property
    def _ref(self) -> ViewRef:
        if self._view_ref is None:
            view = self._pinned.view
            self._view_ref = from_checked(ViewRef, {"id": view.id, "scope": view.request.scope})
        return self._view_ref

    @property
    def _policy_lock(self) -> anyio.Lock:
        if self._lock is None:
            # uncontended (one read at a time is the usual turn): no checkpoint to take it
            self._lock = anyio.Lock(fast_acquire=True)
        return self._lock

    def close(self) -> None:
        """Refuse every later execution (in-flight ones finish on their own leases)."""
        self._released = True

    @property
    def _deadline(self) -> float:
        return self._pinned.generation.plan.settings.source_timeout

    @property
    def _max_input_bytes(self) -> int:
        return self._pinned.generation.plan.settings.max_input_bytes

    def _open(self, error: type[RouteError | ActionError]) -> None:
        if self._released:
            raise error(f"View {self._pinned.view.id} is released", code="released")
        generation = self._pinned.generation
        if self._pinned.view.generation_id != generation.id or generation.disposed:
            raise error(
                f"View {self._pinned.view.id} belongs to generation "
                f"{self._pinned.view.generation_id}, which can no longer execute",
                code="released",
            )

    # ------------------------------------------------------------------ routes

    async def execute_route(
        self,
        route_id: str,
        input: Mapping[str, Any] | None = None,
        limits: EvidenceLimits | Mapping[str, Any] | None = None,
    ) -> Evidence:
        """Execute one route read on the pinned View (through the turn policy, if any).

        Raises:
            RouteError: with a `code` naming what failed; see `RouteError`.
        """
        self._open(RouteError)
        route = self._pinned.view.route(route_id)
        if route is None:
            raise RouteError(f"route {route_id!r} is not in this View", code="unknown-route")
        if not self._pinned.generation.observers.active:
            return await self._execute_route(route, input, limits)
        started = time.perf_counter()
        evidence: Evidence | None = None
        error: RouteError | None = None
        try:
            evidence = await self._execute_route(route, input, limits)
            return evidence
        except RouteError as exc:
            error = exc
            raise
        finally:
            self._pinned.generation.observers.emit(
                "mnemon_observe_route",
                type_id=self._pinned.generation.by_key[route.source_key].manifest.type_id,
                route_id=route.route_id,
                outcome="ok" if evidence is not None else "failed",
                error_code=None if error is None else error.code,
                origin_code=None if error is None else error.origin_code,
                retry_after=None if error is None else error.retry_after,
                items=0 if evidence is None else len(evidence.items),
                truncated=evidence is not None and evidence.truncated,
                duration=time.perf_counter() - started,
            )

    async def _execute_route(
        self,
        route: ViewRoute,
        input: Mapping[str, Any] | None,
        limits: EvidenceLimits | Mapping[str, Any] | None,
    ) -> Evidence:
        route_id = route.id
        pinned = self._pinned
        grant = pinned.grants.get(route.source_key)
        if grant is None:  # the core pins a grant for every selected route
            raise RouteError(f"route {route_id!r} has no pinned grant", code="contract")
        value = checked_input(
            route.input_schema,
            input,
            f"route {route_id!r} input",
            RouteError,
            max_bytes=self._max_input_bytes,
        )
        ceilings = _narrowed(route, limits, strict=False)
        lease = pinned.generation.lease()
        try:
            if pinned.strategy.create_turn is None:
                return await self._read(route, ceilings, grant, value)
            return await self._through_policy(route, ceilings, grant, value)
        finally:
            with anyio.CancelScope(shield=True):
                await lease.release()

    async def _through_policy(
        self, route: ViewRoute, ceilings: ViewRoute, grant: ReadGrant, value: FrozenDict
    ) -> Evidence:
        policy = await self._turn_policy()
        reader = _Reader(self, route, ceilings, grant, value)
        request = PolicyRequest(
            view=self._ref,
            route=ceilings,
            input=value,
            vector_spaces=self._pinned.generation.plan.vector_spaces,
        )
        try:
            produced = await policy.query(request, reader)
        except MnemonError:
            raise
        except Exception as exc:
            raise RouteError(
                f"route {route.id!r}: the turn policy failed", code="policy-failed"
            ) from exc
        finally:
            reader.close()
        return _normalized(produced, self._ref.id, route, ceilings)

    async def _turn_policy(self) -> Any:
        # one policy per turn, made on the first read; concurrent reads wait for the same one
        if self._policy is not None:
            return self._policy
        async with self._policy_lock:
            if self._policy is None:
                create_turn = self._pinned.strategy.create_turn
                assert create_turn is not None
                try:
                    policy = await awaited(create_turn(self._pinned.view))
                except Exception as exc:
                    raise RouteError(
                        "the Strategy's create_turn() failed", code="policy-failed"
                    ) from exc
                if not callable(getattr(policy, "query", None)):
                    raise RouteError("the Strategy's turn policy has no query()", code="contract")
                self._policy = policy
            return self._policy

    async def _read(
        self, route: ViewRoute, ceilings: ViewRoute, grant: ReadGrant, value: FrozenDict
    ) -> Evidence:
        calls = self._ledger.get(route.id, 0)
        if calls >= route.max_calls:
            raise RouteError(
                f"route {route.id!r}: call budget is exhausted ({route.max_calls} per turn)",
                code="call-budget-exhausted",
            )
        # counted before dispatch: a failed read still spends a call
        self._ledger[route.id] = calls + 1
        key = route.source_key
        runtime = self._pinned.generation.by_key[key].runtime
        request = QueryRequest(view=self._ref, route=ceilings, grant=grant, input=value)
        started = time.perf_counter()
        produced, failure, timed_out = await call_source(
            lambda: runtime.query(request), self._deadline
        )
        self._pinned.generation.observe_call("query", key, failure, timed_out, started)
        where = f"route {route.id!r}: Memory Source {key} query()"
        if timed_out:
            raise RouteError(f"{where} timed out", code="timeout", retryable=True, source_key=key)
        if failure is not None:
            source_failure(where, failure, RouteError, source_key=key)
        return _normalized(produced, self._ref.id, route, ceilings)

    # ------------------------------------------------------------------ actions

    async def execute_action(
        self,
        offer_id: str,
        input: Mapping[str, Any] | None,
        authorize: Authorize,
        *,
        idempotency_key: str | None = None,
    ) -> MutationReceipt:
        """Execute one write offer after `authorize(offer)` allows it, this time.

        Raises:
            ActionError: with a `code` and, when a write was attempted, an honest `receipt`.
            RevisionConflict: the Source refused a stale expected revision.
        """
        self._open(ActionError)
        offer = self._pinned.view.offer(offer_id)
        if offer is None:
            raise ActionError(f"offer {offer_id!r} is not in this View", code="unknown-offer")
        if not self._pinned.generation.observers.active:
            return await self._execute_action(offer, input, authorize, idempotency_key)
        started = time.perf_counter()
        receipt: MutationReceipt | None = None
        code: str | None = None
        failed: ActionError | None = None
        try:
            receipt = await self._execute_action(offer, input, authorize, idempotency_key)
            return receipt
        except ActionError as exc:
            code, receipt, failed = exc.code, exc.receipt, exc  # type: ignore[assignment]
            raise
        except RevisionConflict:
            code = "revision-conflict"
            raise
        finally:
            self._pinned.generation.observers.emit(
                "mnemon_observe_action",
                type_id=self._pinned.generation.by_key[offer.source_key].manifest.type_id,
                action_id=offer.action_id,
                completion=None if receipt is None else receipt.completion,
                error_code=code,
                origin_code=None if failed is None else failed.origin_code,
                retry_after=None if failed is None else failed.retry_after,
                duration=time.perf_counter() - started,
            )

    async def _execute_action(
        self,
        offer: ActionOffer,
        input: Mapping[str, Any] | None,
        authorize: Authorize,
        idempotency_key: str | None,
    ) -> MutationReceipt:
        offer_id = offer.id
        pinned = self._pinned
        value = checked_input(
            offer.input_schema,
            input,
            f"offer {offer_id!r} input",
            ActionError,
            max_bytes=self._max_input_bytes,
        )
        if idempotency_key is not None and (
            not isinstance(idempotency_key, str) or not 0 < len(idempotency_key) <= 200
        ):
            raise ActionError(
                f"offer {offer_id!r}: an idempotency key is 1 to 200 characters",
                code="invalid-input",
            )
        lease = pinned.generation.lease()
        try:
            # asked on every execution: an earlier yes authorizes nothing now
            decision = await awaited(authorize(offer))
            if not decision:
                raise ActionError(
                    f"offer {offer_id!r} is not currently authorized", code="not-authorized"
                )
            request = MutationRequest(
                view=self._ref,
                offer=offer,
                grant=pinned.grants.get(offer.source_key),  # a read grant, never write authority
                input=value,
                idempotency_key=idempotency_key,
            )
            try:
                return await self._write(offer, request)
            except ActionError as refused:
                if not self._maintains(refused):
                    raise
                return await self._after_maintenance(offer, request, value, refused, authorize)
        finally:
            with anyio.CancelScope(shield=True):
                await lease.release()

    def _maintains(self, refused: ActionError) -> bool:
        # only a refusal that wrote nothing, under a Strategy with a maintenance policy
        receipt = refused.receipt
        return (
            self._pinned.strategy.maintain is not None
            and self._maintainer is not None
            and isinstance(receipt, MutationReceipt)
            and receipt.completion == "failed"
            and refused.kind == "terminal"
        )

    async def _after_maintenance(
        self,
        offer: ActionOffer,
        request: MutationRequest,
        value: FrozenDict,
        refused: ActionError,
        authorize: Authorize,
    ) -> MutationReceipt:
        """Run the Strategy's maintenance after a refused write; retry it once if it made room.

        Raises:
            ActionError: the original refusal (with `maintenance` set) when maintenance was
                refused, failed or archived nothing, or the retried write's own failure.
        """
        trigger = MaintenanceTrigger(
            kind="refused-write",
            source_key=offer.source_key,
            action_id=offer.action_id,
            code=refused.code,
            input=value,
        )
        assert self._maintainer is not None
        try:
            report = await self._maintainer(self._pinned, trigger, authorize)
        except MaintenanceError as failed:
            if failed.report is not None:
                self.maintenance.append(failed.report)  # type: ignore[arg-type]
            refused.maintenance = failed
            raise refused from refused.__cause__
        self.maintenance.append(report)
        if report.archived == 0:
            refused.maintenance = report
            raise refused from refused.__cause__
        # asked again: an earlier yes authorizes nothing now
        if not await awaited(authorize(offer)):
            raise ActionError(
                f"offer {offer.id!r} is not currently authorized", code="not-authorized"
            )
        try:
            return await self._write(offer, request)
        except ActionError as again:
            again.maintenance = report
            raise

    async def maintain(
        self, authorize: Authorize, *, dry_run: bool, expected_plan: str | None
    ) -> MaintenanceReport:
        """Run the Strategy's maintenance for this View, as an operator asked.

        Raises:
            MaintenanceError: see `run_maintenance`.
        """
        if self._released:
            raise MaintenanceError(f"View {self._pinned.view.id} is released", code="released")
        if self._maintainer is None:
            raise MaintenanceError("this turn runs no maintenance", code="no-maintenance-policy")
        lease = self._pinned.generation.lease()
        try:
            report = await self._maintainer(
                self._pinned,
                MaintenanceTrigger(kind="operator"),
                authorize,
                dry_run=dry_run,
                expected_plan=expected_plan,
            )
        except MaintenanceError as failed:
            if failed.report is not None:
                self.maintenance.append(failed.report)  # type: ignore[arg-type]
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await lease.release()
        self.maintenance.append(report)
        return report

    async def _write(self, offer: ActionOffer, request: MutationRequest) -> MutationReceipt:
        runtime = self._pinned.generation.by_key[offer.source_key].runtime
        started = time.perf_counter()
        produced, failure, timed_out = await call_source(
            lambda: runtime.mutate(request), self._deadline
        )
        self._pinned.generation.observe_call(
            "mutate", offer.source_key, failure, timed_out, started
        )
        where = f"offer {offer.id!r}: Memory Source {offer.source_key} mutate()"
        if timed_out:
            raise ActionError(
                f"{where} timed out; the write may or may not have happened",
                code="timeout",
                retryable=True,
                receipt=_receipt(request, "unknown", "cancelled"),
                source_key=offer.source_key,
            )
        if failure is not None:
            if isinstance(failure, RevisionConflict):
                raise failure
            refused = isinstance(failure, SourceError) and failure.nothing_written
            receipt = _receipt(
                request, "failed" if refused else "unknown", "failed", _failure_detail(failure)
            )
            source_failure(
                where, failure, ActionError, receipt=receipt, source_key=offer.source_key
            )
        try:
            receipt = validate_model(
                MutationReceipt, produced, subject=f"{where} receipt", error=ActionError
            )
        except ActionError as exc:
            raise ActionError(
                str(exc), code="contract", receipt=_receipt(request, "unknown", "failed")
            ) from None
        bound = (receipt.view_id, receipt.offer_id, receipt.source_key, receipt.idempotency_key)
        expected = (request.view.id, offer.id, offer.source_key, request.idempotency_key)
        if bound != expected:
            raise ActionError(
                f"{where} returned a receipt bound to another View, offer, Source or "
                "idempotency key",
                code="contract",
                receipt=_receipt(request, "unknown", "failed"),
            )
        return receipt


def _failure_detail(failure: BaseException) -> dict[str, Any]:
    """The coded facts of a Source's failure a receipt repeats: codes and numbers, never text."""
    if not isinstance(failure, SourceError):
        return {}
    detail: dict[str, Any] = {"error_code": failure.code, "error_kind": failure.kind}
    if failure.origin_code is not None:
        detail["origin_code"] = failure.origin_code
    if failure.retry_after is not None:
        detail["retry_after"] = failure.retry_after
    return detail


def _receipt(
    request: MutationRequest,
    completion: str,
    status: str,
    detail: Mapping[str, Any] | None = None,
) -> MutationReceipt:
    return MutationReceipt(
        view_id=request.view.id,
        offer_id=request.offer.id,
        source_key=request.offer.source_key,
        completion=completion,  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        idempotency_key=request.idempotency_key,
        detail=dict(detail or {}),
    )
