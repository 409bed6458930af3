"""What every page shares: the templates, the request's language, forms, answers and toasts.

Templates autoescape, and every value they print passes through `visible_text` first, so a
control or bidi-override character in a plugin's or a memory's text is shown as an escape,
never obeyed. A value put back into a form field (`|editable`) keeps its characters (the field
must submit exactly what it holds), and is still HTML-escaped.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from mnemon import visible_text

from ._control import Board
from ._i18n import LANGUAGES, Words, language_of
from ._receipts import Toast
from ._scope import FLAGS

__all__ = [
    "LANGUAGE_COOKIE",
    "Editable",
    "Page",
    "answer_change",
    "cell_text",
    "form_of",
    "is_rows",
    "language",
    "notice_of",
    "render",
    "row_columns",
    "source_path",
    "wants_json",
]

LANGUAGE_COOKIE = "mnemon-board-language"


class Editable(str):
    """Text a form field holds: printed HTML-escaped, its characters otherwise untouched."""

    __slots__ = ()


def _shown(value: Any) -> Any:
    if isinstance(value, Markup | Editable) or not isinstance(value, str):
        return value
    return visible_text(value)


def _environment() -> jinja2.Environment:
    templates = resources.files("mnemon_board") / "templates"
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        finalize=_shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["editable"] = lambda value: Editable("" if value is None else str(value))
    environment.filters["compact"] = lambda value: (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    )
    environment.filters["json"] = lambda value: Editable(
        json.dumps(value, ensure_ascii=False, indent=2)
    )
    # memory read from a Source, shown (never put back in a field): `visible_text` applies
    environment.filters["pretty"] = lambda value: json.dumps(value, ensure_ascii=False, indent=2)
    environment.filters["cell"] = cell_text
    environment.filters["flag"] = lambda key: FLAGS.get(key, key)
    environment.filters["prefixed"] = lambda pair: (f"f.{pair[0]}", pair[1])
    environment.globals["is_rows"] = is_rows
    environment.globals["source_path"] = source_path
    environment.globals["row_columns"] = row_columns
    return environment


# a table cell shows this much of a value; the whole record is a click away
CELL_CHARACTERS = 240
# a table of an operation's output shows at most this many fields of its rows
ROW_COLUMNS = 10


def source_path(source_key: str, tail: str = "", query: str = "") -> str:
    """The address of a Source's page (`tail`: a sub-page), keeping `query`."""
    path = f"/sources/{quote(source_key, safe='')}{tail}"
    return f"{path}?{query}" if query else path


def cell_text(value: Any) -> str:
    """A value as a table cell shows it: text, a list's items, an object's `key: value`s."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, Mapping):
        text = " · ".join(f"{key}: {cell_text(item)}" for key, item in value.items())
    elif isinstance(value, list | tuple):
        text = ", ".join(cell_text(item) for item in value)
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CELL_CHARACTERS else text[: CELL_CHARACTERS - 1] + "…"


def is_rows(value: Any) -> bool:
    """Whether a value is drawn as a table: a non-empty list of objects."""
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(item, Mapping) for item in value)
    )


def row_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The columns of a table of objects: every key, in the order first met (`id` first)."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(str(key) for key in row))
    ordered = sorted(keys, key=lambda key: key != "id")
    return ordered[:ROW_COLUMNS]


_TEMPLATES = _environment()


@dataclass(frozen=True, slots=True)
class Page:
    """A page of the board's navigation: its id (the template's name), its path, its word."""

    id: str
    path: str
    title: str


def language(request: Request) -> Words:
    """The words of the language this request is shown in (`?lang=`, its cookie, the browser)."""
    chosen = request.query_params.get("lang") or request.cookies.get(LANGUAGE_COOKIE)
    return Words(language_of(chosen, request.headers.get("accept-language")))


def render(request: Request, template: str, **context: Any) -> HTMLResponse:
    """Draw a page (or a fragment) in the request's language, with what every page needs."""
    board: Board = request.app.state.board
    pages: Sequence[Page] = request.app.state.pages
    words = language(request)
    context.setdefault("notice", None)
    body = _TEMPLATES.get_template(template).render(
        page=template.removesuffix(".html"),
        words=words,
        pages=pages,
        path=request.url.path,
        csrf=request.app.state.csrf,
        languages=LANGUAGES,
        problem=board.problem,
        profile_name=board.path.name,
        **context,
    )
    response = HTMLResponse(body)
    if request.query_params.get("lang") in LANGUAGES:
        response.set_cookie(LANGUAGE_COOKIE, words.language, samesite="strict", httponly=True)
    return response


async def form_of(request: Request) -> dict[str, list[str]]:
    """The submitted fields (a form, or a JSON object of strings and lists) by name.

    Raises:
        ValueError: the body is neither.
    """
    body = await request.body()
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind == "application/json":
        data = json.loads(body or b"{}")
        if not isinstance(data, Mapping):
            raise ValueError("the request body must be a JSON object")
        fields: dict[str, list[str]] = {}
        for key, value in data.items():
            values = value if isinstance(value, list) else [value]
            fields[str(key)] = [
                "true" if v is True else "false" if v is False else str(v) for v in values
            ]
        return fields
    return parse_qs(body.decode("utf-8"), keep_blank_values=True)


def wants_json(request: Request) -> bool:
    """Whether the page's script asked (it answers JSON); a plain form gets a page back."""
    return "application/json" in request.headers.get("accept", "")


def answer_change(request: Request, toast: Toast, back: str, status: int = 200) -> Response:
    """A change's answer: JSON for the script, else back to the page with the toast on it."""
    if wants_json(request):
        return JSONResponse(toast.as_json(), status_code=status)
    notices: dict[str, Toast] = request.app.state.notices
    key = secrets.token_urlsafe(8)
    notices[key] = toast
    while len(notices) > 32:
        notices.pop(next(iter(notices)))
    where, hash_mark, fragment = back.partition("#")
    separator = "&" if "?" in where else "?"
    target = f"{where}{separator}notice={key}{hash_mark}{fragment}"
    return RedirectResponse(target, status_code=303)


def notice_of(request: Request) -> Toast | None:
    """The toast a plain form's change left for the page it returned to."""
    key = request.query_params.get("notice")
    notices: dict[str, Toast] = request.app.state.notices
    return notices.get(key) if key else None
