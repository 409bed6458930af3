"""Memory text: one rule for what Sources accept, and one for how readers are shown it.

`check_memory_text` (and `memory_text_schema` for input schemas) is the rule every Source
applies to text it stores: no control characters but newline and tab, no bidi controls, no
line or paragraph separators, within a size. `visible_text` is how the Wake a model reads and
the lines the `mnemon` command prints show any text: what could move a cursor, rewrite a title
or clipboard, break a line where none shows, reorder or hide text becomes a visible escape.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ._errors import SourceError

__all__ = ["check_memory_text", "memory_text_schema", "visible_json", "visible_text"]

# C0 controls but tab and newline, DEL and C1 controls, the bidi controls, and the line and
# paragraph separators: never part of valid memory text
_FORBIDDEN = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_FORBIDDEN_IN_TEXT = re.compile(f"[{_FORBIDDEN}]")
_FORBIDDEN_IN_LINE = re.compile(rf"[\n\t{_FORBIDDEN}]")
# not in the schema's pattern: a JSON Schema regex without Unicode mode reads astral characters
# as surrogate pairs; the core refuses unpaired surrogates at the JSON boundary anyway
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NAMES = {
    "Cc": "a control character",
    "Cs": "an unpaired surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def check_memory_text(
    text: str,
    *,
    max_characters: int,
    single_line: bool = False,
    field: str = "text",
    allow_blank: bool = False,
) -> str:
    """Return `text` if it is valid memory text, else refuse it naming `field` and the rule.

    Valid memory text is not blank (unless `allow_blank`: an optional body may be empty), at
    most `max_characters` long, and has no control character but newline and tab (neither,
    with `single_line`), no bidi control (U+061C, U+200E, U+200F, U+202A-U+202E,
    U+2066-U+2069), no line or paragraph separator (U+2028, U+2029) and no unpaired surrogate
    (it has no UTF-8 form to store): nothing that could make one memory pose as two or
    reorder what a reader sees. The message names the character by code point, never quotes
    the text.

    Raises:
        SourceError: `invalid_payload` (nothing is written).
    """
    # blank: empty or only whitespace (what `not text.strip()` says, without its copy)
    if not allow_blank and (not text or text.isspace()):
        raise SourceError("invalid_payload", f"{field}: must not be blank")
    if len(text) > max_characters:
        raise SourceError("invalid_payload", f"{field}: at most {max_characters} characters")
    if text.isascii() and text.isprintable():
        return text  # U+0020 to U+007E only: none of the characters refused below
    found = (_FORBIDDEN_IN_LINE if single_line else _FORBIDDEN_IN_TEXT).search(text)
    if found is None:
        found = _SURROGATE.search(text)
    if found is not None:
        character = found.group()
        kind = _NAMES.get(unicodedata.category(character), "a bidi control")
        raise SourceError("invalid_payload", f"{field}: contains {kind} (U+{ord(character):04X})")
    return text


def memory_text_schema(
    max_characters: int, *, single_line: bool = False, allow_blank: bool = False
) -> dict[str, Any]:
    """A JSON Schema for an input property holding memory text, by the same rule.

    Use it in route and action input schemas so the core refuses bad text before the Source
    is called; `check_memory_text` remains the Source's own check.
    """
    forbidden = rf"\n\t{_FORBIDDEN}" if single_line else _FORBIDDEN
    if allow_blank:
        return {"type": "string", "maxLength": max_characters, "pattern": rf"^[^{forbidden}]*$"}
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": max_characters,
        # not only spaces, and none of the forbidden characters
        "pattern": rf"^(?!\s*$)[^{forbidden}]*$",
    }


# Control (Cc), format (Cf: bidi controls, zero-width characters, tag characters), surrogate
# (Cs: undecodable bytes smuggled through surrogateescape) and the line and paragraph
# separators (Zl, Zp) can move the cursor, rewrite the title or clipboard, hide text, or
# reorder what the reader sees.
_RISKY_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Zero-width (non-)joiners shape emoji and several scripts; they cannot reorder or hide text.
_KEPT_FORMAT = frozenset({"\u200c", "\u200d"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _risky(character: str, *, keep_newlines: bool) -> bool:
    if character == "\t" or (character == "\n" and keep_newlines):
        return False
    return unicodedata.category(character) in _RISKY_CATEGORIES and character not in _KEPT_FORMAT


def _escape(character: str) -> str:
    named = _NAMED.get(character)
    if named is not None:
        return named
    point = ord(character)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def visible_text(text: str, *, keep_newlines: bool = True) -> str:
    r"""`text` with every character that could act on a terminal shown as a visible escape.

    C0 controls (except tab, and newline unless `keep_newlines` is false), DEL, C1 controls,
    bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), U+2028, U+2029,
    other format characters (zero-width space, BOM, soft hyphen, tag characters; the
    zero-width joiner and non-joiner stay) and lone surrogates become `\x1b`, `\r`,
    `\u202e`, `\U000e0041`. A backslash already in the text is left as it is.

    Args:
        text: memory or Source-provided text.
        keep_newlines: keep line breaks (for multi-line bodies); false for one-line fields.

    Returns:
        The text as it may be printed.
    """
    if text.isprintable():
        return text  # the common case: nothing to look at character by character
    return "".join(
        _escape(character) if _risky(character, keep_newlines=keep_newlines) else character
        for character in text
    )


def visible_json(document: str) -> str:
    r"""A JSON document with the same characters escaped as JSON escapes (`\u001b`).

    The document still parses to the same value: such characters can only occur inside
    strings, where a `\uXXXX` escape means the same character.

    Args:
        document: JSON text.

    Returns:
        The JSON text as it may be printed.
    """
    if document.isprintable():
        return document
    parts = []
    for character in document:
        if character in "\n\t" or not _risky(character, keep_newlines=False):
            parts.append(character)  # whitespace between tokens is kept for pretty output
            continue
        point = ord(character)
        if point < 0x10000:
            parts.append(f"\\u{point:04x}")
        else:
            point -= 0x10000
            parts.append(f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}")
    return "".join(parts)
