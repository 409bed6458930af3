"""Words, query terms, BM25 and excerpts: the text rules recall is built on.

`words()` mirrors SQLite FTS5's `unicode61 remove_diacritics 2` tokenizer closely enough that
the terms the Python side counts are the terms the index matched.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

from mnemon.sdk import truncate_text

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "bm25_term",
    "excerpt",
    "inverse_document_frequency",
    "query_terms",
    "words",
]

_WORD = re.compile(r"[^\W_]+")
_ASCII_WORDS = bytes(
    byte if chr(byte).isascii() and chr(byte).isalnum() else 0x20 for byte in range(256)
).lower()
MAX_QUERY_TERMS = 16
MAX_TERM_LENGTH = 64
BM25_K1 = 1.2
BM25_B = 0.75
ELLIPSIS = "…"

# small and English-only on purpose: they are dropped from queries, never from the index
# fmt: off
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves",
))
# fmt: on


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def words(text: str) -> list[str]:
    """The index terms of `text`: letter and digit runs, lower-cased, diacritics removed."""
    if text.isascii():
        # the common case: in ASCII a letter or digit is one of 62 bytes; one table lowers
        # them and turns every other byte into a space, in C and three times the regex's speed
        return text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
    return [word.lower() if word.isascii() else _fold(word) for word in _WORD.findall(text)]


def query_terms(query: str) -> list[str]:
    """The distinct terms a query searches for, in order, at most `MAX_QUERY_TERMS`.

    Stop words are dropped unless nothing else is left; over-long terms are dropped.
    """
    terms = [term for term in dict.fromkeys(words(query)) if len(term) <= MAX_TERM_LENGTH]
    content = [term for term in terms if term not in STOPWORDS]
    return (content or terms)[:MAX_QUERY_TERMS]


def fts_phrase(term: str) -> str:
    """`term` as a quoted FTS5 string: user text never reaches FTS5 query syntax."""
    return '"' + term.replace('"', '""') + '"'


def inverse_document_frequency(documents: int, containing: int) -> float:
    """BM25's inverse document frequency in its always-positive form.

    `ln(1 + (N - n + 0.5) / (n + 0.5))`: unlike the classic form (which FTS5 floors at 1e-6
    when a term is in over half the documents) it still tells terms apart in a small space.
    """
    containing = min(max(containing, 0), documents)
    return math.log(1 + (documents - containing + 0.5) / (containing + 0.5))


def bm25_term(frequency: float, length: int, average_length: float, idf: float) -> float:
    """One term's BM25 contribution (k1 = 1.2, b = 0.75, as FTS5's `bm25()`)."""
    if frequency <= 0:
        return 0.0
    norm = 1 - BM25_B + BM25_B * (length / average_length if average_length > 0 else 1.0)
    return idf * frequency * (BM25_K1 + 1) / (frequency + BM25_K1 * norm)


def excerpt(text: str, terms: Sequence[str], limit: int) -> str:
    """At most `limit` characters of `text`, around the first query term it contains.

    Cut ends are marked with `…`; nothing is cut when the text fits.
    """
    if len(text) <= limit:
        return text
    if limit <= 2:
        return truncate_text(text, limit)
    start = _first_match(text, terms)
    # keep a little context before the match
    start = max(0, min(start - limit // 4, len(text) - (limit - 1)))
    while 0 < start < len(text) and unicodedata.combining(text[start]):
        start -= 1
    prefix = ELLIPSIS if start > 0 else ""
    room = limit - len(prefix)
    body = text[start:]
    if len(body) > room:
        body = truncate_text(body, room - 1).rstrip() + ELLIPSIS
    return prefix + body


def _first_match(text: str, terms: Iterable[str]) -> int:
    lowered = text.lower()
    found = [lowered.find(term) for term in terms if term]
    hits = [position for position in found if position >= 0]
    return min(hits) if hits else 0
