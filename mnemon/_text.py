"""Untrusted text made visible: control, bidi and other invisible characters escaped.

One rule for memory text wherever a reader sees it: the Wake a model reads and the lines the
`mnemon` command prints. What could move a cursor, rewrite a title or clipboard, break a line
where none shows, reorder or hide text becomes a visible escape instead.
"""

from __future__ import annotations

import unicodedata

__all__ = ["visible_json", "visible_text"]

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
