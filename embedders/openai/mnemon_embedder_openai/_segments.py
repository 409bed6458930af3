"""Segments of a part: pieces of at most `limit` code points, cut at whitespace, tiling the part.

An API reads a bounded input, so a long part is cut into consecutive pieces that each fit.
A cut goes where whitespace ends and a word begins, as late as the limit allows, so the
segments cover every code point of the part with no gap and no overlap, and each later one
starts on a word. Pure: offsets are Python string indices, which are code points.
"""

from __future__ import annotations

import re

__all__ = ["cut_segments"]

# whitespace with a word after it: a cut there starts the next segment on the word
_WORD_START = re.compile(r"\s(?=\S)")
_SPACE = re.compile(r"\s")


def _cut(text: str, start: int, limit: int) -> int:
    """Where the segment starting at `start` ends: at most `limit` code points further on."""
    # the code point after the window too: whether a word starts right at the limit
    window = text[start : start + limit + 1]
    cut = 0
    for found in _WORD_START.finditer(window):  # the latest word start within the limit
        if found.end() <= limit:
            cut = found.end()
    if cut == 0:  # a run of whitespace reaching past the limit: end inside it
        for found in _SPACE.finditer(window, 0, limit):
            cut = found.end()
    # one word longer than the limit is cut inside it (a grapheme made of several code
    # points, such as an emoji sequence, may be split there)
    return start + (cut or limit)


def cut_segments(text: str, limit: int) -> list[tuple[int, int]]:
    """The `(start, end)` code-point bounds of each segment of `text`.

    Args:
        text: the part's text.
        limit: the most code points one segment may hold (at least 1).

    Returns:
        No segment for an empty text, `(0, len(text))` when it fits, otherwise consecutive
        segments from 0 to `len(text)`, each of at most `limit` code points.
    """
    length = len(text)
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < length:
        end = length if length - start <= limit else _cut(text, start, limit)
        bounds.append((start, end))
        start = end
    return bounds
