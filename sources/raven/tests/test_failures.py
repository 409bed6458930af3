"""Raven's row of the failure table, both ways: what a backend raises, and what it becomes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mnemon_source_raven as raven
import pytest
from mnemon_source_raven import raven_exception_name, source_error
from raven_reference import INSTANCES, FileBackend

from mnemon import ActionError, RouteError, SourceError
from mnemon_testing import MemoryCompositionRunner, SelectAll

TEXT = "backend said: token tok-RAVEN-77 for ada@example.org"


class QuotaExceeded(Exception):
    """A backend's own exception type."""


def allow(offer: object) -> bool:
    return True


def newest(directory: Path) -> FileBackend:
    return [b for b in INSTANCES if directory in b.workspace.parents][-1]


async def read_and_write_failing(tmp_path: Path, failure: BaseException) -> tuple[Any, Any]:
    """A recall and a store whose backend raises `failure`: the route and action errors."""

    async def fail(*args: Any, **kwargs: Any) -> Any:
        raise failure

    runner = MemoryCompositionRunner()
    config = {"backend": "raven_reference:make_backend", "data_dir": str(tmp_path)}
    await runner.mount(raven, instance_id="raven", config=config)
    await runner.mount(SelectAll(), instance_id="all", config={"required": True})
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        backend = newest(tmp_path)
        backend.recall = fail  # type: ignore[method-assign,assignment]
        backend.store = fail  # type: ignore[method-assign,assignment]
        with pytest.raises(RouteError) as read:
            await turn.execute_route("source:raven/recall", {"query": "tea"})
        with pytest.raises(ActionError) as write:
            await turn.execute_action(
                "source:raven/store", {"messages": [{"role": "user", "content": "tea"}]}, allow
            )
        await turn.release()
    return read.value, write.value


EXCEPTIONS = [
    RuntimeError(TEXT),
    ValueError(TEXT),
    ConnectionError(TEXT),
    # the operating system's refusal says nothing about the store: still provider_error
    PermissionError(TEXT),
    TimeoutError(TEXT),
    QuotaExceeded(TEXT),
]


@pytest.mark.parametrize("failure", EXCEPTIONS, ids=lambda e: type(e).__name__)
async def test_any_exception_is_a_transient_provider_error_and_a_receipt_unknown(
    tmp_path: Path, failure: Exception
) -> None:
    read, write = await read_and_write_failing(tmp_path, failure)
    name = type(failure).__name__
    for error in (read, write):
        assert (error.code, error.kind, error.retryable) == ("provider_error", "transient", True)
        assert (error.origin_code, error.retry_after) == (name, None)
    receipt: Any = write.receipt
    assert receipt.completion == "unknown"  # the store may or may not have happened
    assert dict(receipt.detail) == {
        "error_code": "provider_error",
        "error_kind": "transient",
        "origin_code": name,
    }
    for shown in (str(read), str(write), receipt.model_dump_json()):
        assert "tok-RAVEN" not in shown
        assert "ada@example.org" not in shown
    # and back: the origin code names the exception the backend raised
    mapped = source_error(failure, "the recall")
    assert raven_exception_name(mapped) == name


SOURCE_ERRORS = [
    (SourceError("rate_limited", TEXT, retry_after=7, origin_code="http-429"), "unknown"),
    (SourceError("unauthorized", TEXT, origin_code="http-401"), "failed"),
    (SourceError("invalid_payload", TEXT, origin_code="INVALID_INPUT"), "failed"),
    (SourceError("provider_error", TEXT, kind="terminal", nothing_written=False), "unknown"),
]


@pytest.mark.parametrize(
    ("failure", "completion"), SOURCE_ERRORS, ids=lambda v: getattr(v, "code", v)
)
async def test_a_source_error_from_the_backend_keeps_its_code_class_and_origin(
    tmp_path: Path, failure: SourceError, completion: str
) -> None:
    read, write = await read_and_write_failing(tmp_path, failure)
    for error in (read, write):
        assert (error.code, error.kind, error.origin_code, error.retry_after) == (
            failure.code,
            failure.kind,
            failure.origin_code,
            failure.retry_after,
        )
    assert write.receipt.completion == completion
    assert "tok-RAVEN" not in str(read) + str(write)
    # and back: a backend's own SourceError is itself, not a wrapped exception
    assert source_error(failure, "the recall") is failure
    if failure.code != "provider_error":
        assert raven_exception_name(failure) is None
