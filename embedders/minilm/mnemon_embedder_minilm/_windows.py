"""Segments of a part: windows of word pieces the model reads whole, tiling the part's text.

A part the model reads in one sequence is one segment. A longer one is cut into consecutive
windows of at most `limit` word pieces, at word boundaries where possible; each segment runs
from its first piece to where the next segment starts, so the segments cover every code point
of the part with no gap and no overlap. Pure: the caller tokenizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

__all__ = ["cut_windows"]


def cut_windows(
    offsets: Sequence[tuple[int, int]],
    words: Sequence[int | None],
    length: int,
    limit: int,
) -> list[tuple[int, int]]:
    """The `(start, end)` code-point bounds of each segment of a part of `length` code points.

    Args:
        offsets: each word piece's `(start, end)` in code points, in order.
        words: each word piece's word index (pieces of one word share it).
        length: the part's length in code points.
        limit: the most word pieces one segment may hold.

    Returns:
        No segment for an empty part, one `(0, length)` when its pieces fit, otherwise
        consecutive segments from 0 to `length`.
    """
    if length == 0:
        return []
    if len(offsets) <= limit:
        return [(0, length)]
    firsts = []  # the index of each window's first piece
    first = 0
    while first < len(offsets):
        firsts.append(first)
        following = first + limit
        if following >= len(offsets):
            break
        # back off to the start of a word, so a word is never split between two windows
        cut = following
        while cut > first and words[cut] is not None and words[cut] == words[cut - 1]:
            cut -= 1
        # a word longer than a window is cut inside it (the tokenizer makes a word of more
        # than 100 characters one unknown piece, so only a limit under 100 could meet this)
        first = cut if cut > first else following
    bounds = [0]
    for index in firsts[1:]:
        start = offsets[index][0]
        if bounds[-1] < start < length:  # never an empty segment
            bounds.append(start)
    bounds.append(length)
    return list(pairwise(bounds))
