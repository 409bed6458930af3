"""Readable terminal output for the `mnemon` command; every text shown is terminal-safe."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from .._models import Evidence, MutationReceipt
from .._text import visible_text
from ..tools import receipt_text

__all__ = ["Printer", "receipt_summary"]

# starts each further line of an item's text, in place of its line break: an item starts with
# `• ` and its label with two spaces and a key, so no line of an item's text can pose as
# either (the runtime Source marks its Wake entries' continuation lines the same way)
_CONTINUATION = "  | "

# what each completion proves, in the words a user reads; never more than the receipt says
_COMPLETION = {
    "committed": "stored",
    "accepted": "accepted, not yet confirmed durable",
    "candidate": "proposed as a candidate, not stored yet",
    "partial": "partly stored: only part of the write got through",
    "failed": "refused: nothing was stored",
    "unknown": "unknown: the write may or may not have been stored; check with recall",
}


def receipt_summary(receipt: MutationReceipt) -> str:
    """One line saying how far a write got, for a person (the tools' rule, human wording).

    Args:
        receipt: the write's receipt.

    Returns:
        e.g. `stored: memory m-1 in space personal`; never "stored" for less than committed.
    """
    return receipt_text(receipt, phrases=_COMPLETION)


class Printer:
    """Writes headings, evidence, receipts and reports; colors only on a terminal.

    Every text goes through `visible_text`: memory and Source-provided text can carry
    escape sequences, and the command prints them whether stdout is a terminal or a pipe.
    """

    def __init__(self, *, color: bool | None = None, err: bool = False) -> None:
        self.color = color
        self.err = err  # everything on stderr (a command whose stdout is JSON)

    def _echo(self, text: str, *, err: bool = False, **style: Any) -> None:
        click.secho(visible_text(text), color=self.color, err=err or self.err, **style)

    def heading(self, text: str) -> None:
        """A section heading."""
        self._echo(f"\n== {visible_text(text, keep_newlines=False)} ", bold=True, fg="cyan")

    def line(self, text: str = "") -> None:
        """Plain text, several lines allowed (a Wake)."""
        self._echo(text)

    def ok(self, text: str) -> None:
        """A success."""
        self._echo(f"✓ {text}", fg="green")

    def warn(self, text: str, *, err: bool = False) -> None:
        """Something to notice."""
        self._echo(f"! {text}", fg="yellow", err=err)

    def field(self, name: str, value: object) -> None:
        """One `name: value` line."""
        shown = visible_text(str(value), keep_newlines=False)
        line = click.style(f"  {name:<18}", dim=True) + shown
        click.echo(line, color=self.color, err=self.err)

    def evidence(self, evidence: Evidence) -> None:
        """The items of one route read, with provenance."""
        title = f"{evidence.route_id}: {len(evidence.items)} item(s)"
        if evidence.truncated:
            title += " (truncated: more did not fit)"
        self.heading(title)
        if evidence.output is not None:
            self.field("policy", evidence.output)
        for item in evidence.items:
            details = {
                key: value for key, value in item.provenance.items() if isinstance(value, str | int)
            }
            tier = item.metadata.get("tier") or item.provenance.get("tier")
            # visible_text leaves only \n breaking a line: every other break shows as an escape
            self._echo("• " + item.text.replace("\n", "\n" + _CONTINUATION), fg="white")
            label = ", ".join(f"{key}={value}" for key, value in details.items())
            if tier and "tier" not in details:
                label = f"tier={tier}, {label}" if label else f"tier={tier}"
            if label:
                self._echo(f"  {visible_text(label, keep_newlines=False)}", dim=True)

    def receipt(self, receipt: MutationReceipt) -> None:
        """A write's receipt: how far it got, in words, then its fields."""
        self.heading("receipt")
        good = receipt.completion == "committed"
        self._echo(f"  {receipt_summary(receipt)}", fg="green" if good else "yellow", bold=True)
        self.field("completion", f"{receipt.completion} / {receipt.status}")
        self.field("offer", receipt.offer_id)
        if receipt.committed_at:
            self.field("committed at", receipt.committed_at)
        if receipt.revision:
            self.field("revision", receipt.revision)
        if receipt.idempotency_key:
            self.field("idempotency", receipt.idempotency_key)

    def report(self, report: Mapping[str, Any]) -> None:
        """The host's inspect report."""
        self.heading(f"state: {report['state']}")
        if report.get("data_dir") is not None:
            self.field("data_dir", report["data_dir"])
        serving = report.get("serving")
        if serving:
            self.field("generation", serving["generation_id"])
            strategy = serving["strategy"]
            self.field("strategy", f"{strategy['key']} ({strategy['package_name']})")
            for source in serving["sources"]:
                self.field("source", f"{source['key']} — {source['role']}, {source['consistency']}")
            for extension in serving["extensions"]:
                self.field("extension", extension["key"])
        for entry in report.get("management", []):
            self.field("manage", f"{entry['source_key']}: {', '.join(entry['operations'])}")
        for diagnostic in report.get("diagnostics", []):
            self.warn(f"{diagnostic['code']}: {diagnostic['message']}")
        if "health" in report:
            scope = ", ".join(f"{key}={value}" for key, value in report["scope"].items())
            self.heading(f"health for scope: {scope or 'none (no identity flags)'}")
            for entry in report["health"]:
                self.field(entry["source_key"], entry["health"])
                for line in entry["diagnostics"]:
                    self.warn(f"  {line}")
