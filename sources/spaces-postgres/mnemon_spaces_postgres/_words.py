"""A query's words as the `simple` text search configuration would find them, without asking.

Recall needs the query's lexemes to build its statement; asking the server for them first
costs a round trip of its own. For the common query, plain words and everyday punctuation,
the server's rule is simple: the default parser splits ASCII text into runs of letters and
digits, and the `simple` dictionary lowercases each one; the lexemes come back sorted (as a
`tsvector` sorts them) and once each. Text the rule does not cover for certain (hyphens, dots,
slashes, markup, entities, non-ASCII letters, very long words) is left to the server. The
statement checks the guess against the server's own answer, so a wrong guess costs a second
statement, never a different result.
"""

from __future__ import annotations

import re

__all__ = ["SIMPLE_CONFIGS", "predicted_lexemes"]

#: the configurations whose rule this module knows (the built-in `simple`)
SIMPLE_CONFIGS = frozenset({"simple", "pg_catalog.simple"})
# every character here is a separator for the default parser, whatever its neighbours (checked
# against the server); `-`, `.`, `/`, `+`, `~`, `&` and `<`/`>` start hyphenated words, hosts,
# paths, numbers, entities or tags, so text holding them is left to the server
_PLAIN = re.compile(r"[A-Za-z0-9 \t\n\r,;:!?\"'()\[\]{}_*=#%$^`|\\@]*")
_WORD = re.compile(r"[A-Za-z0-9]+")
#: longer runs are left to the server (it drops words past its own length limit)
_LONGEST = 100


def predicted_lexemes(text: str, config: str) -> list[str] | None:
    """The lexemes `to_tsvector(config, text)` holds, in its order; None when not certain."""
    if config not in SIMPLE_CONFIGS or not _PLAIN.fullmatch(text):
        return None
    words = _WORD.findall(text)
    if not words or any(len(word) > _LONGEST for word in words):
        return None
    # a tsvector orders lexemes by their bytes (a prefix first); ASCII sorts the same as str
    return sorted({word.lower() for word in words})
