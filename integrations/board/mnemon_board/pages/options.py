"""Options: one form per entry, drawn from the configuration its plugin declares.

Switches and selectors apply as soon as they change; typed values wait for Apply. A value that
does not fit the declaration (its type, bounds, length, choices) shows the field's error and
changes nothing; so does one the plugin itself refuses when the host mounts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnemon import visible_text

from .._catalog import EntryView, entries_view
from .._control import Board, ChangeRefused
from .._edits import ProfileDocument
from .._forms import (
    MASK,
    REMOVE,
    FormField,
    form_fields,
    masked,
    parse_field,
    plain,
    schema_errors,
)
from .._i18n import Words
from .._receipts import Toast, applied_toast, refused_toast
from .._web import Page, answer_change, form_of, language, notice_of, render, wants_json

__all__ = ["PAGE", "ROUTES"]

PAGE = Page("options", "/options", "options")
WHOLE = "*"  # the field of a configuration edited whole, as JSON


def _forms(board: Board, words: Words) -> list[tuple[EntryView, tuple[FormField, ...] | None]]:
    return [
        (view, form_fields(view.schema) if view.schema is not None else None)
        for view in entries_view(board, words)
    ]


def _source_keys(board: Board) -> list[str]:
    serving = board.host.inspect().get("serving") or {}
    return sorted(item["key"] for item in serving.get("sources", []))


async def page(request: Request) -> Response:
    """The Options page."""
    board: Board = request.app.state.board
    await board.refresh()
    return _page(request, board)


def _page(
    request: Request,
    board: Board,
    failed: str | None = None,
    errors: Mapping[str, str] | None = None,
    submitted: Mapping[str, list[str]] | None = None,
    status: int = 200,
) -> Response:
    words = language(request)
    response = render(
        request,
        "options.html",
        forms=_forms(board, words),
        source_keys=_source_keys(board),
        failed=failed,
        errors=errors or {},
        submitted=submitted or {},
        mask=MASK,
        whole=WHOLE,
        notice=notice_of(request),
    )
    response.status_code = status
    return response


def _new_config(
    fields: tuple[FormField, ...] | None,
    current: Mapping[str, Any],
    submitted: Mapping[str, list[str]],
    only: str | None,
) -> tuple[dict[str, Any], set[str], dict[str, str]]:
    """The keys to set and to remove, or each field's error (keyed by field)."""
    values: dict[str, Any] = {}
    removed: set[str] = set()
    errors: dict[str, str] = {}
    if fields is None:
        try:
            whole = parse_field(_WHOLE_FIELD, submitted.get(f"f.{WHOLE}", []), dict(current))
        except ValueError as exc:
            return {}, set(), {WHOLE: str(exc)}
        whole = {} if whole is REMOVE else whole
        if not isinstance(whole, dict):
            return {}, set(), {WHOLE: "must be a table (a JSON object)"}
        return whole, set(current) - set(whole), {}
    for field in fields:
        if only is not None and field.key != only:
            continue
        name = f"f.{field.key}"
        if name not in submitted:
            continue  # a field the request does not carry is left as it is
        try:
            value = parse_field(field, submitted.get(name, []), current.get(field.key))
        except ValueError as exc:
            errors[field.key] = str(exc)
            continue
        if value is REMOVE:
            if field.key in current:
                removed.add(field.key)
        elif current.get(field.key) != value or field.key not in current:
            values[field.key] = value
    return values, removed, errors


_WHOLE_FIELD = FormField(
    key=WHOLE, title="", description=None, kind="json", required=False, has_default=False,
    default=None, minimum=None, maximum=None, integer=False, max_length=None, max_items=None,
    options=(), schema={},
)  # fmt: skip


async def apply(request: Request) -> Response:
    """Apply an entry's submitted values (one, for a switch or selector; else every field)."""
    board: Board = request.app.state.board
    words = language(request)
    submitted = await form_of(request)
    entry_id = (submitted.get("entry") or [""])[-1]
    only = (submitted.get("only") or [""])[-1] or None
    found = next((item for item in _forms(board, words) if item[0].id == entry_id), None)
    entry = next((item for item in board.profile.entries if item.id == entry_id), None)
    if found is None or entry is None:
        return answer_change(request, refused_toast(words, "no such entry"), PAGE.path, 400)
    view, fields = found
    current = plain(entry.config)
    values, removed, errors = _new_config(fields, current, submitted, only)
    if not errors and view.schema is not None:
        merged = {k: v for k, v in {**current, **values}.items() if k not in removed}
        errors = schema_errors(view.schema, merged)
        if fields is None and errors:
            errors = {WHOLE: " ".join(f"{k}: {v}" if k else v for k, v in errors.items())}
        elif fields is not None:
            known = {field.key for field in fields}
            errors = {key: message for key, message in errors.items() if key in known or not key}
    if errors:
        return _refused(request, board, words, entry_id, errors, submitted)
    changed = sorted({*values, *removed})
    secrets = {field.key for field in fields or () if field.kind == "secret"}
    shown = tuple(
        f"{entry_id}.{key}: {_said(key, values, removed, words, secrets)}" for key in changed
    )

    def edit(document: ProfileDocument) -> None:
        document.set_config(entry_id, values, removed)

    try:
        applied = await board.apply(edit, shown)
    except ChangeRefused as exc:
        return _refused(request, board, words, entry_id, {"": str(exc)}, submitted, fields)
    return answer_change(request, applied_toast(words, applied), f"{PAGE.path}#entry-{entry_id}")


def _said(
    key: str, values: Mapping[str, Any], removed: set[str], words: Words, secrets: set[str]
) -> str:
    """What a key was set to, for the toast: a secret's value never, a long one cut short."""
    if key in removed:
        return words["unset"]
    value = MASK if key in secrets else masked({key: values[key]})[key]
    if isinstance(value, bool):
        text = words["on"] if value else words["off"]
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = visible_text(text, keep_newlines=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _refused(
    request: Request,
    board: Board,
    words: Words,
    entry_id: str,
    errors: Mapping[str, str],
    submitted: Mapping[str, list[str]],
    fields: tuple[FormField, ...] | None = None,
) -> Response:
    # the plugin's own refusal names its key: put it on that field when one is named
    if "" in errors and fields is not None:
        message = errors[""]
        named = [field.key for field in fields if f".{field.key}" in message]
        if len(named) == 1:
            errors = {named[0]: message}
    lines = tuple(
        f"{key}: {message}" if key and key != WHOLE else message for key, message in errors.items()
    )
    if wants_json(request):
        title = words["refused"] if set(errors) <= {""} else words["field-errors"]
        toast = Toast(False, title, lines)
        return JSONResponse(
            {**toast.as_json(), "entry": entry_id, "errors": dict(errors)}, status_code=422
        )
    return _page(request, board, entry_id, errors, submitted, status=422)


ROUTES = [
    Route("/options", page, methods=["GET"]),
    Route("/options/apply", apply, methods=["POST"]),
]
