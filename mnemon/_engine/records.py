"""The records contract: what a Source's answer to a core-owned record operation must be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import ManagementError
from .._models import (
    ManagementDescriptor,
    ManagementResult,
    RecordDeleteResult,
    RecordKind,
    RecordPage,
    RecordWriteResult,
    validate_model,
)
from .._schema import input_problems

__all__ = ["checked_record_output"]

_SHAPES: dict[str, type[RecordPage | RecordWriteResult | RecordDeleteResult]] = {
    "records-read": RecordPage,
    "records-write": RecordWriteResult,
    "records-delete": RecordDeleteResult,
}


def checked_record_output(
    descriptor: ManagementDescriptor,
    operation: str,
    value: Mapping[str, Any],
    result: ManagementResult,
    where: str,
) -> ManagementResult:
    """`result`, its output checked against the record operation's shape (others untouched).

    Raises:
        ManagementError: `contract`, naming what the Source's answer gets wrong (never its
            records' content).
    """
    shape = _SHAPES.get(operation)
    if shape is None:
        return result
    subject = f"{where} output"
    try:
        output = validate_model(shape, result.output, subject=subject, error=ManagementError)
    except ManagementError as exc:
        raise _contract(str(exc)) from None
    kind = next(kind for kind in descriptor.records if kind.id == value["kind"])
    if isinstance(output, RecordPage):
        _check_page(output, kind, value, subject)
    elif isinstance(output, RecordWriteResult):
        indexes = [outcome.index for outcome in output.results]
        if indexes != list(range(len(value["records"]))):
            raise _contract(f"{subject}: one result per record, in order (index 0, 1, ...)")
    return result


def _check_page(page: RecordPage, kind: RecordKind, value: Mapping[str, Any], subject: str) -> None:
    if len(page.records) > value["limit"]:
        raise _contract(f"{subject}: {len(page.records)} records for a limit of {value['limit']}")
    first = "cursor" not in value
    if kind.group_field is not None and first and page.groups is None:
        raise _contract(f"{subject}: the first page of grouped kind {kind.id!r} names its groups")
    if page.groups is not None and not (kind.group_field is not None and first):
        raise _contract(f"{subject}: only the first page of a grouped kind names groups")
    group = value.get("group")
    for index, record in enumerate(page.records):
        if not isinstance(record.get("id"), str) or not record["id"]:
            raise _contract(f"{subject}: records[{index}] has no string id")
        problems = input_problems(kind.record_schema, record)
        if problems:
            raise _contract(f"{subject}: records[{index}]: {'; '.join(problems)}")
        if (
            group is not None
            and kind.group_field is not None
            and record.get(kind.group_field) != group
        ):
            raise _contract(f"{subject}: records[{index}] is not of the group asked for")


def _contract(message: str) -> ManagementError:
    return ManagementError(message, code="contract")
