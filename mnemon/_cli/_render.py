"""Readable terminal output for the `mnemon` command."""

from __future__ import annotations

from typing import Any

import click

from .._models import Evidence, MutationReceipt


class Printer:
    """Writes headings, evidence, receipts and reports; colors only on a terminal."""

    def __init__(self, *, color: bool | None = None) -> None:
        self.color = color

    def _echo(self, text: str, **style: Any) -> None:
        click.secho(text, color=self.color, **style)

    def heading(self, text: str) -> None:
        """A section heading."""
        self._echo(f"\n== {text} ", bold=True, fg="cyan")

    def line(self, text: str = "") -> None:
        """Plain text."""
        self._echo(text)

    def ok(self, text: str) -> None:
        """A success."""
        self._echo(f"✓ {text}", fg="green")

    def warn(self, text: str) -> None:
        """Something to notice."""
        self._echo(f"! {text}", fg="yellow")

    def field(self, name: str, value: object) -> None:
        """One `name: value` line."""
        click.echo(click.style(f"  {name:<18}", dim=True) + str(value), color=self.color)

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
            self._echo(f"• {item.text}", fg="white")
            label = ", ".join(f"{key}={value}" for key, value in details.items())
            if tier and "tier" not in details:
                label = f"tier={tier}, {label}" if label else f"tier={tier}"
            if label:
                self._echo(f"  {label}", dim=True)

    def receipt(self, receipt: MutationReceipt) -> None:
        """A write's receipt: how far it got."""
        self.heading("receipt")
        colour = "green" if receipt.completion == "committed" else "yellow"
        self._echo(f"  {receipt.completion} / {receipt.status}", fg=colour, bold=True)
        self.field("offer", receipt.offer_id)
        if receipt.committed_at:
            self.field("committed at", receipt.committed_at)
        if receipt.revision:
            self.field("revision", receipt.revision)
        if receipt.idempotency_key:
            self.field("idempotency", receipt.idempotency_key)

    def report(self, report: dict[str, Any]) -> None:
        """The host's inspect report."""
        self.heading(f"state: {report['state']}")
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
