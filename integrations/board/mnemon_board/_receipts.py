"""How the board says what a change did: one toast, the same on every page.

A toast says whether the change was made, what moved, and offers Undo when it can be undone.
The pages that write memory say each write's receipt the same way, never more than the
Source said: stored (committed), accepted (taken, durability not confirmed), replayed
(already there: nothing new), refused (nothing written, with why), unknown (the write may or
may not have happened), or only answered (the Source did not say whether it is durable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemon import ManagementError, MnemonError, RevisionConflict, visible_text

from ._control import Applied
from ._i18n import Words

__all__ = [
    "RECEIPTS",
    "Toast",
    "applied_toast",
    "deleted_toast",
    "failure_toast",
    "outcomes_toast",
    "refused_toast",
    "written_toast",
]

#: what a write's toast can say of it (its `receipt`), strongest first
RECEIPTS = (
    "committed", "accepted", "replayed", "deleted", "not-deleted", "answered", "refused",
    "conflict", "unknown",
)  # fmt: skip
# failures that prove nothing about whether the write happened: the Source timed out, or
# failed in a way it did not classify, or said trying again may succeed
_UNKNOWN_CODES = frozenset({"timeout", "source-failed", "contract"})
_UNKNOWN_KINDS = frozenset({"transient", "degraded"})
_SHOWN_CHARACTERS = 80


@dataclass(frozen=True, slots=True)
class Toast:
    """What a change did, for the toast (and the page drawn after a form without scripts)."""

    ok: bool
    title: str
    lines: tuple[str, ...] = ()
    undo: str | None = None
    receipt: str | None = None
    """For a write of memory: what its receipt says (one of `RECEIPTS`)."""

    def as_json(self) -> dict[str, Any]:
        """The toast as the page's script reads it."""
        return {
            "ok": self.ok,
            "title": self.title,
            "lines": list(self.lines),
            "undo": self.undo,
            "receipt": self.receipt,
        }


def applied_toast(words: Words, applied: Applied, title: str = "moved") -> Toast:
    """The toast of a change the host took: what moved, and Undo."""
    if not applied.moved:
        return Toast(True, words["nothing-changed"])
    return Toast(True, words[title], applied.moved, applied.undo)


def refused_toast(words: Words, why: str) -> Toast:
    """The toast of a change that was refused, with why (nothing changed)."""
    return Toast(False, words["refused"], (why,))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    text = visible_text(text, keep_newlines=False)
    return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 1] + "…"


def _facts(output: Mapping[str, Any]) -> tuple[str, ...]:
    """The output's short facts (`id: m-12`, `space: personal`), for the toast's lines."""
    lines = []
    for key, value in output.items():
        if key in ("completion", "durable", "replayed", "duplicate"):
            continue  # said by the title
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            lines.append(f"{key}: {_short(value)}")
    return tuple(lines[:6])


def _outcome_receipt(outcome: Mapping[str, Any]) -> str:
    completion = outcome.get("completion")
    if completion == "refused":
        return "refused"
    if outcome.get("replayed") is True:
        return "replayed"
    return "committed" if completion == "committed" else "accepted"


def outcomes_toast(words: Words, outcomes: Sequence[Mapping[str, Any]]) -> Toast:
    """The toast of a batch's outcomes (`records-write`, an import): what each record became.

    One record is said by its own outcome; several by how many of each, the refused ones
    with their code and message (which name a field and a rule, never the content).
    """
    receipts = [_outcome_receipt(outcome) for outcome in outcomes]
    if not receipts:
        return Toast(True, words["receipt-answered"], receipt="answered")
    counted = Counter(receipts)
    lines = []
    for outcome, receipt in zip(outcomes, receipts, strict=True):
        if receipt == "refused":
            code = outcome.get("code") or "refused"
            message = outcome.get("message")
            lines.append(
                f"#{outcome.get('index', 0)}: {code}" + (f": {_short(message)}" if message else "")
            )
        elif outcome.get("id") is not None and len(receipts) == 1:
            lines.append(f"id: {_short(outcome['id'])}")
    if len(counted) == 1:
        receipt = receipts[0]
    else:
        # a batch is said by its weakest outcome; each count is on its own line
        receipt = max(counted, key=RECEIPTS.index)
        lines = [f"{words['receipt-' + name]}: {count}" for name, count in counted.items()] + lines
    return Toast(receipt != "refused", words[f"receipt-{receipt}"], tuple(lines), receipt=receipt)


def written_toast(words: Words, output: Any) -> Toast:
    """The toast of a mutating operation's output, saying no more than the output says.

    The output's own words are read: `results` (one outcome per record), `completion`
    (`committed`, `accepted`, ...), `replayed` or `duplicate`, `durable`, `committed_at`, and
    `deleted` or `forgotten` false (nothing was there). Without any of them, the write is
    said to be answered only, not stored.
    """
    if not isinstance(output, Mapping):
        return Toast(True, words["receipt-answered"], receipt="answered")
    results = output.get("results")
    if (
        isinstance(results, Sequence)
        and results
        and all(isinstance(item, Mapping) and "completion" in item for item in results)
    ):
        return outcomes_toast(words, results)
    facts = _facts(output)
    if output.get("deleted") is False or output.get("forgotten") is False:
        return Toast(True, words["receipt-not-deleted"], facts, receipt="not-deleted")
    completion = output.get("completion")
    durable = output.get("durable")
    if completion not in ("committed", "accepted", "unknown"):
        if isinstance(durable, bool):
            completion = "committed" if durable else "accepted"
        elif output.get("committed_at"):
            completion = "committed"
        else:
            completion = "answered"
    if completion in ("committed", "accepted") and (
        output.get("replayed") is True or output.get("duplicate") is True
    ):
        completion = "replayed"
    return Toast(completion != "unknown", words[f"receipt-{completion}"], facts, receipt=completion)


def deleted_toast(words: Words, output: Any) -> Toast:
    """The toast of `records-delete`: deleted, or nothing there to delete in this scope."""
    if isinstance(output, Mapping) and output.get("deleted") is True:
        return Toast(True, words["receipt-deleted"], _facts(output), receipt="deleted")
    return Toast(True, words["receipt-not-deleted"], receipt="not-deleted")


def failure_toast(words: Words, exc: MnemonError) -> tuple[Toast, int]:
    """The toast of a write that raised, and the HTTP status to answer with.

    A revision conflict and a refusal wrote nothing; a timeout or an unclassified failure
    proves nothing either way, so it is said to be unknown.
    """
    said = " ".join(str(exc).split())
    if isinstance(exc, RevisionConflict):
        return Toast(False, words["receipt-conflict"], (said,), receipt="conflict"), 409
    code = getattr(exc, "code", None)
    kind = getattr(exc, "kind", None)
    if isinstance(exc, ManagementError) and (code in _UNKNOWN_CODES or kind in _UNKNOWN_KINDS):
        return Toast(False, words["receipt-unknown"], (said,), receipt="unknown"), 502
    return Toast(False, words["receipt-refused"], (said,), receipt="refused"), 422
