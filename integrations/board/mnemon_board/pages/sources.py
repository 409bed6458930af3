"""Memory: each Source's pages, drawn only from what the Source declares for people.

The management catalog says, per Source, its operations (id, read or mutate, input schema)
and the kinds of record it holds (the core's records contract). From that alone:

- **Sources** (`/sources`): every Source with a management plane, the scope ids it needs,
  its record kinds and its operations.
- **Records** (`/sources/{key}`): one kind's records (of one group), a page at a time, each
  readable whole; deleted with a confirmation, fenced by the revision the page was drawn at;
  added through a form drawn from the kind's record schema when the kind is writable.
- **Operations** (`/sources/{key}/operations/{id}`): any operation as a form drawn from its
  input schema. A read runs on submit and its output is shown as tables and fields (a list
  of objects is a table; each row can open the operations that take its id). A mutation is
  confirmed, fenced by the page's revision, and its receipt says no more than the Source did.

No Source is named here: a third-party Source that declares records or operations gets the
same pages, with no change to the board.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnemon import (
    ManagementEntry,
    ManagementError,
    ManagementOperation,
    MnemonError,
    RecordKind,
)

from .._control import Board
from .._forms import REMOVE, FormField, form_fields, parse_field, schema_errors
from .._i18n import Words
from .._management import (
    ManagementPlane,
    RecordsPage,
    operation_of,
    own_operations,
    row_operations,
)
from .._receipts import (
    Toast,
    deleted_toast,
    failure_toast,
    outcomes_toast,
    refused_toast,
    written_toast,
)
from .._scope import SCOPE_FIELDS, Identity, identity_of
from .._web import (
    Page,
    answer_change,
    form_of,
    language,
    notice_of,
    render,
    source_path,
    wants_json,
)

__all__ = ["PAGE", "ROUTES", "source_path"]

PAGE = Page("sources", "/sources", "sources")
PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 25
# a table shows at most this many fields of a record; the whole record is a click away
MAX_COLUMNS = 6
# a field longer than this (a document's body) is read in the record, not in the table
LONG_FIELD = 1_000


# ------------------------------------------------------------------ forms from schemas


@dataclass(frozen=True, slots=True)
class InputForm:
    """A form drawn from a JSON Schema: its fields, and the values fixed by `const`."""

    fields: tuple[FormField, ...]
    fixed: Mapping[str, Any]
    schema: Mapping[str, Any]

    @property
    def required(self) -> tuple[FormField, ...]:
        """The fields a value is needed for."""
        return tuple(field for field in self.fields if field.required)

    @property
    def optional(self) -> tuple[FormField, ...]:
        """The fields that may be left empty."""
        return tuple(field for field in self.fields if not field.required)


def _nullable_type(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """A property typed `["integer", "null"]` read as an optional integer (and so on)."""
    kind = schema.get("type")
    if isinstance(kind, list | tuple):
        kept = [item for item in kind if item != "null"]
        if len(kept) == 1:
            return {**schema, "type": kept[0]}
    return schema


def input_form(schema: Mapping[str, Any], *, leave_out: Sequence[str] = ()) -> InputForm:
    """The form of an object schema: one field per property (but `leave_out`).

    A property with a `const` takes its value without a field.
    """
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    fixed = {
        key: prop["const"]
        for key, prop in properties.items()
        if isinstance(prop, Mapping) and "const" in prop
    }
    shown = {
        key: _nullable_type(prop)
        for key, prop in properties.items()
        if key not in fixed and key not in leave_out and isinstance(prop, Mapping)
    }
    fields = form_fields({**schema, "properties": shown}) if shown else None
    return InputForm(fields or (), fixed, schema)


def _parsed(
    form: InputForm, submitted: Mapping[str, list[str]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The object a submitted form makes, or each field's error (never quoting a value)."""
    values: dict[str, Any] = dict(form.fixed)
    errors: dict[str, str] = {}
    for field in form.fields:
        try:
            value = parse_field(field, submitted.get(f"f.{field.key}", []), None)
        except ValueError as exc:
            errors[field.key] = str(exc)
            continue
        if value is not REMOVE:
            values[field.key] = value
    if not errors:
        known = {field.key for field in form.fields}
        for key, message in schema_errors(form.schema, values).items():
            errors[key if key in known else ""] = message
    return values, errors


def _prefilled(request: Request) -> dict[str, str]:
    """The field values the address gives (`?f.id=m-1`): a row's link opens its operation."""
    return {
        key.removeprefix("f."): value
        for key, value in request.query_params.items()
        if key.startswith("f.")
    }


# ------------------------------------------------------------------ what the pages show


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """One Source of the Sources page."""

    entry: ManagementEntry
    path: str
    missing: tuple[str, ...]
    """The scope ids it partitions by that the picked identity lacks, as flags."""
    operations: tuple[ManagementOperation, ...]


@dataclass(frozen=True, slots=True)
class Row:
    """One record of a table: its fields as shown, the whole record, what it opens."""

    record: Mapping[str, Any]
    links: tuple[tuple[str, str, str], ...]
    """(operation id, its kind, the address opening it filled in from the row)."""


def _not_found(request: Request, what: str) -> Response:
    words = language(request)
    response = render(request, "sources.html", summaries=[], identity=identity_of(request),
                      scope_fields=SCOPE_FIELDS, missing_source=what, source_path=source_path,
                      notice=refused_toast(words, what))  # fmt: skip
    response.status_code = 404
    return response


def _entry(request: Request) -> tuple[Board, ManagementPlane, ManagementEntry | None]:
    board: Board = request.app.state.board
    plane = ManagementPlane(board.host)
    return board, plane, plane.entry(request.path_params["key"])


def _links(
    entry: ManagementEntry, identity: Identity, record: Mapping[str, Any], kind: str | None
) -> tuple[tuple[str, str, str], ...]:
    links = []
    for operation, fields in row_operations(entry, record, kind):
        prefill = {f"f.{key}": value for key, value in fields.items()}
        required = set(operation.input_schema.get("required") or ())
        # a read whose every required input the row fills runs at once
        run = 1 if operation.kind == "read" and required <= set(fields) else None
        query = identity.query(**prefill, run=run)
        path = source_path(entry.source_key, f"/operations/{quote(operation.id, safe='')}", query)
        links.append((operation.id, operation.kind, path))
    return tuple(links)


def columns_of(kind: RecordKind) -> tuple[str, ...]:
    """The fields a kind's table shows: id, group and label first, then short ones."""
    properties = kind.record_schema.get("properties") or {}
    first = [name for name in ("id", kind.group_field, kind.label_field) if name]
    rest = []
    for name, prop in properties.items():
        if name in first or not isinstance(prop, Mapping):
            continue
        longest = prop.get("maxLength")
        if isinstance(longest, int) and longest > LONG_FIELD:
            continue
        rest.append(name)
    return tuple(dict.fromkeys([*first, *rest]))[:MAX_COLUMNS]


def _page_size(request: Request) -> int:
    given = request.query_params.get("limit", "")
    return int(given) if given.isdigit() and int(given) in PAGE_SIZES else DEFAULT_PAGE_SIZE


async def _posted(
    request: Request,
) -> Response | tuple[ManagementPlane, ManagementEntry, Words, Mapping[str, list[str]], str]:
    """A write's Source, words, submitted form and way back; or the refusal of an unknown Source."""
    _, plane, entry = _entry(request)
    words = language(request)
    submitted = await form_of(request)
    back = _back(request, submitted, PAGE.path)
    if entry is None:
        return answer_change(request, refused_toast(words, words["no-such-source"]), back, 404)
    return plane, entry, words, submitted, back


def _back(request: Request, submitted: Mapping[str, list[str]], fallback: str) -> str:
    back = (submitted.get("back") or [fallback])[-1]
    return back if back.startswith("/") and not back.startswith("//") else fallback


def _here(request: Request) -> str:
    """This page's address without a notice: where a form sends the browser back to."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "notice"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


# ------------------------------------------------------------------ pages


async def index(request: Request) -> Response:
    """The Sources page: every Source with a management plane, for the picked identity."""
    board: Board = request.app.state.board
    await board.refresh()
    identity = identity_of(request)
    summaries = [
        SourceSummary(
            entry=entry,
            path=source_path(entry.source_key, query=identity.query()),
            missing=tuple(identity.missing(entry.partition_keys)),
            operations=own_operations(entry),
        )
        for entry in ManagementPlane(board.host).catalog().values()
    ]
    return render(
        request,
        "sources.html",
        summaries=summaries,
        identity=identity,
        scope_fields=SCOPE_FIELDS,
        missing_source=None,
        source_path=source_path,
        notice=notice_of(request),
    )


async def records(request: Request) -> Response:
    """A Source's records page: one kind (one group), a page at a time."""
    await request.app.state.board.refresh()
    _, plane, entry = _entry(request)
    if entry is None:
        return _not_found(request, language(request)["no-such-source"])
    identity = identity_of(request)
    kinds = entry.records
    wanted = request.query_params.get("kind")
    kind = next((k for k in kinds if k.id == wanted), None) or next(
        (k for k in kinds if k.readable), kinds[0] if kinds else None
    )
    group = request.query_params.get("group") or None
    cursor = request.query_params.get("cursor") or None
    number = request.query_params.get("page", "1")
    limit = _page_size(request)
    page: RecordsPage | None = None
    failure: str | None = identity.invalid
    missing = identity.missing(entry.partition_keys)
    revision: str | None = None
    if failure is None and not missing and kind is not None:
        try:
            if kind.readable:
                page = await plane.records(
                    entry.source_key, identity.scope, kind, limit=limit, group=group, cursor=cursor
                )
                revision = page.revision
            else:
                revision = await plane.revision(entry.source_key, identity.scope)
        except MnemonError as exc:
            failure = f"{getattr(exc, 'code', 'error')}: {' '.join(str(exc).split())}"
    rows = [
        Row(record, _links(entry, identity, record, kind.id if kind else None))
        for record in (page.records if page else ())
    ]
    add = input_form(kind.record_schema, leave_out=("id",)) if kind and kind.writable else None
    page_number = int(number) if number.isdigit() else 1
    kind_id = kind.id if kind else None
    next_page = None
    if page is not None and page.next_cursor:
        query = identity.query(
            kind=kind_id, group=group, cursor=page.next_cursor, limit=limit, page=page_number + 1
        )
        next_page = source_path(entry.source_key, query=query)
    here = _here(request)
    return render(
        request,
        "source.html",
        entry=entry,
        identity=identity,
        scope_fields=SCOPE_FIELDS,
        kind=kind,
        kinds=kinds,
        group=group,
        records_page=page,
        rows=rows,
        columns=columns_of(kind) if kind else (),
        add=add,
        failure=failure,
        missing=missing,
        revision=revision,
        idempotency_key=f"board-{secrets.token_urlsafe(12)}",
        limit=limit,
        page_sizes=PAGE_SIZES,
        page_number=page_number,
        next_page=next_page,
        first_page=source_path(
            entry.source_key,
            query=identity.query(kind=kind.id if kind else None, group=group, limit=limit),
        ),
        operations=own_operations(entry),
        source_path=source_path,
        here=here,
        notice=notice_of(request),
    )


def _partial(value: Any) -> bool:
    """Whether an output says it is partial (`complete: false`, `partial` or `truncated`)."""
    return isinstance(value, Mapping) and (
        value.get("complete") is False
        or value.get("partial") is True
        or value.get("truncated") is True
    )


async def operation(request: Request) -> Response:
    """An operation's page: its form, and for a read that ran, its output."""
    await request.app.state.board.refresh()
    _, plane, entry = _entry(request)
    if entry is None:
        return _not_found(request, language(request)["no-such-source"])
    words = language(request)
    found = operation_of(entry, request.path_params["operation"])
    if found is None:
        return _not_found(request, words["no-such-operation"])
    identity = identity_of(request)
    form = input_form(found.input_schema)
    prefilled = _prefilled(request)
    errors: dict[str, str] = {}
    failure = identity.invalid
    missing = identity.missing(entry.partition_keys)
    output: Any = None
    ran = False
    revision: str | None = None
    status = 200
    if failure is None and not missing:
        try:
            if found.kind == "read" and request.query_params.get("run"):
                submitted = {f"f.{key}": [value] for key, value in prefilled.items()}
                value, errors = _parsed(form, submitted)
                if not errors:
                    output = await plane.read(entry.source_key, identity.scope, found.id, value)
                    ran = True
                else:
                    status = 422
            elif found.kind == "mutate":
                revision = await plane.revision(entry.source_key, identity.scope)
        except MnemonError as exc:
            failure = f"{getattr(exc, 'code', 'error')}: {' '.join(str(exc).split())}"
            status = 422 if isinstance(exc, ManagementError) else 500

    def links(row: Any) -> tuple[tuple[str, str, str], ...]:
        if not isinstance(row, Mapping):
            return ()
        return _links(entry, identity, row, None)

    response = render(
        request,
        "operation.html",
        entry=entry,
        operation=found,
        identity=identity,
        scope_fields=SCOPE_FIELDS,
        form=form,
        prefilled=prefilled,
        errors=errors,
        failure=failure,
        missing=missing,
        output=output,
        ran=ran,
        partial=_partial(output),
        revision=revision,
        row_links=links,
        operations=own_operations(entry),
        source_path=source_path,
        here=_here(request),
        notice=notice_of(request),
    )
    response.status_code = status
    return response


# ------------------------------------------------------------------ writes


def _field_errors(request: Request, words: Words, errors: Mapping[str, str], back: str) -> Response:
    lines = tuple(f"{key}: {message}" if key else message for key, message in errors.items())
    toast = Toast(False, words["field-errors"], lines, receipt="refused")
    if wants_json(request):
        return JSONResponse({**toast.as_json(), "errors": dict(errors)}, status_code=422)
    return answer_change(request, toast, back, 422)


def _unconfirmed(request: Request, words: Words, back: str) -> Response:
    toast = Toast(False, words["receipt-refused"], (words["not-confirmed"],), receipt="refused")
    return answer_change(request, toast, back, 422)


async def _write(
    request: Request,
    plane: ManagementPlane,
    entry: ManagementEntry,
    operation_id: str,
    payload: Mapping[str, Any],
    revision: str | None,
    back: str,
    said: Any,
) -> Response:
    words = language(request)
    identity = identity_of(request)
    if identity.invalid:
        return answer_change(request, refused_toast(words, identity.invalid), back, 422)
    missing = identity.missing(entry.partition_keys)
    if missing:
        why = words.format("needs-scope", flags=", ".join(missing))
        return answer_change(request, refused_toast(words, why), back, 422)
    try:
        result = await plane.write(
            entry.source_key, identity.scope, operation_id, payload, revision or None
        )
    except MnemonError as exc:
        toast, status = failure_toast(words, exc)
        return answer_change(request, toast, back, status)
    return answer_change(request, said(words, result.output), back)


def _revision(submitted: Mapping[str, list[str]]) -> str | None:
    return (submitted.get("revision") or [""])[-1] or None


def _confirmed(submitted: Mapping[str, list[str]]) -> bool:
    return "yes" in (submitted.get("confirmed") or [])


def _kind(entry: ManagementEntry, submitted: Mapping[str, list[str]]) -> RecordKind | None:
    wanted = (submitted.get("kind") or [""])[-1]
    return next((kind for kind in entry.records if kind.id == wanted), None)


async def add_record(request: Request) -> Response:
    """Add one record of a writable kind (`records-write`), confirmed and fenced."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    plane, entry, words, submitted, back = posted
    kind = _kind(entry, submitted)
    if kind is None or not kind.writable:
        return answer_change(request, refused_toast(words, words["not-writable"]), back, 422)
    record, errors = _parsed(input_form(kind.record_schema, leave_out=("id",)), submitted)
    if errors:
        return _field_errors(request, words, errors, back)
    if not _confirmed(submitted):
        return _unconfirmed(request, words, back)
    key = (submitted.get("idempotency_key") or [""])[-1] or f"board-{secrets.token_urlsafe(12)}"
    payload = {"kind": kind.id, "records": [{"record": record, "idempotency_key": key[:200]}]}

    def said(words: Words, output: Any) -> Toast:
        results = output.get("results") if isinstance(output, Mapping) else None
        return outcomes_toast(words, results or ())

    return await _write(
        request, plane, entry, "records-write", payload, _revision(submitted), back, said
    )


async def delete_record(request: Request) -> Response:
    """Delete one record by its id (`records-delete`), confirmed and fenced."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    plane, entry, words, submitted, back = posted
    kind = _kind(entry, submitted)
    if kind is None or not kind.deletable:
        return answer_change(request, refused_toast(words, words["not-deletable"]), back, 422)
    record_id = (submitted.get("id") or [""])[-1].strip()
    if not record_id:
        return _field_errors(request, words, {"id": words["id-needed"]}, back)
    if not _confirmed(submitted):
        return _unconfirmed(request, words, back)
    payload: dict[str, Any] = {"kind": kind.id, "id": record_id}
    group = (submitted.get("group") or [""])[-1]
    if group and kind.group_field is not None:
        payload["group"] = group
    return await _write(
        request, plane, entry, "records-delete", payload, _revision(submitted), back, deleted_toast
    )


async def run_operation(request: Request) -> Response:
    """Run a mutating operation from its form, confirmed and fenced."""
    posted = await _posted(request)
    if isinstance(posted, Response):
        return posted
    plane, entry, words, submitted, back = posted
    found = operation_of(entry, request.path_params["operation"])
    if found is None or found.kind != "mutate":
        return answer_change(request, refused_toast(words, words["no-such-operation"]), back, 404)
    payload, errors = _parsed(input_form(found.input_schema), submitted)
    if errors:
        return _field_errors(request, words, errors, back)
    if not _confirmed(submitted):
        return _unconfirmed(request, words, back)
    return await _write(
        request, plane, entry, found.id, payload, _revision(submitted), back, written_toast
    )


ROUTES = [
    Route("/sources", index, methods=["GET"]),
    Route("/sources/{key}", records, methods=["GET"]),
    Route("/sources/{key}/records", add_record, methods=["POST"]),
    Route("/sources/{key}/records/delete", delete_record, methods=["POST"]),
    Route("/sources/{key}/operations/{operation}", operation, methods=["GET"]),
    Route("/sources/{key}/operations/{operation}", run_operation, methods=["POST"]),
]
