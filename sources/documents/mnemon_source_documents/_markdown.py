"""The document file format: Markdown with a one-key front matter holding the title.

A file written by this Source reads::

    ---
    title: "The title, as a JSON string"
    ---

    The Markdown body.

Files placed in the folder by hand need no front matter: their title is the first `# heading`
or, failing that, the file name.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from mnemon.sdk import SourceError, check_memory_text

from ._config import LIMITS

__all__ = [
    "MAX_BODY_CHARACTERS",
    "MAX_TITLE_CHARACTERS",
    "ParsedDocument",
    "check_body",
    "check_title",
    "document_revision",
    "parse_document",
    "render_document",
]

MAX_TITLE_CHARACTERS = 200
# a body is bounded by characters here; the configured byte limit is checked by the workspace
MAX_BODY_CHARACTERS = LIMITS["max_document_bytes"][1]
_FENCE = "---"
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t#]*$")


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A document file read back: its title and Markdown body."""

    title: str
    body: str


def document_revision(raw: bytes) -> str:
    """The revision of one document: a digest of its file's exact bytes."""
    return "rev:" + hashlib.sha256(raw).hexdigest()[:32]


def render_document(title: str, body: str) -> bytes:
    """The bytes of a document file (title and body already checked)."""
    header = json.dumps(title, ensure_ascii=False)
    return f"{_FENCE}\ntitle: {header}\n{_FENCE}\n\n{body}".encode()


def _clean_title(text: str) -> str:
    """The title of a file written by hand, or "" (the file name serves) when it is not one."""
    title = text.strip()[:MAX_TITLE_CHARACTERS].strip()
    try:
        return check_memory_text(title, max_characters=MAX_TITLE_CHARACTERS, single_line=True)
    except SourceError:
        return ""


def _header_title(value: str) -> str | None:
    value = value.strip()
    if value.startswith('"'):
        try:
            decoded = json.loads(value)
        except ValueError:
            return None
        return decoded if isinstance(decoded, str) else None
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def parse_document(raw: bytes, fallback_title: str) -> ParsedDocument:
    """Read a document file; never fails (undecodable bytes are replaced, not dropped)."""
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    title: str | None = None
    body = text
    if lines and lines[0].rstrip("\r\n") == _FENCE:
        for index in range(1, len(lines)):
            if lines[index].rstrip("\r\n") in (_FENCE, "..."):
                for line in lines[1:index]:
                    key, _, value = line.partition(":")
                    if key.strip().lower() == "title" and title is None:
                        title = _header_title(value)
                body = "".join(lines[index + 1 :])
                # the blank line after the front matter belongs to the format, not the body
                if body.startswith("\r\n"):
                    body = body[2:]
                elif body.startswith("\n"):
                    body = body[1:]
                break
    if title is None:
        for line in body.splitlines():
            if line.strip():
                heading = _HEADING.match(line.strip())
                title = heading["title"] if heading else None
                break
    title = _clean_title(title or "") or fallback_title
    return ParsedDocument(title=title, body=body)


def check_title(title: str, action: str) -> str:
    """The title to store (surrounding spaces removed): one line of memory text.

    Raises:
        SourceError: `invalid_payload`, saying what is wrong with the title.
    """
    return check_memory_text(
        title.strip(),
        max_characters=MAX_TITLE_CHARACTERS,
        single_line=True,
        field=f"documents {action}: title",
    )


def check_body(body: str, action: str) -> str:
    """The body to store, unchanged: memory text, which may be empty.

    Raises:
        SourceError: `invalid_payload`, saying what is wrong with the body.
    """
    return check_memory_text(
        body,
        max_characters=MAX_BODY_CHARACTERS,
        field=f"documents {action}: body",
        allow_blank=True,
    )
