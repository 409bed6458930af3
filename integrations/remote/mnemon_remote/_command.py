"""`mnemon plugin inspect` and `mnemon plugin test`: the contract runner on the command line.

Exit codes: 0 valid (inspect) or certified (test), 1 invalid or not certified, 2 usage error.
The human report goes to stdout, the plugin's own output to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import click

from ._manifest import inspect_manifest
from ._runner import certify

__all__ = ["plugin_command"]

_MARKS = {"pass": "ok  ", "fail": "FAIL", "skip": "skip"}


@click.group(name="plugin")
def plugin_command() -> None:
    """Inspect and certify remote Source plugins (protocol v0)."""


@plugin_command.command(name="inspect")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.argument("directory", type=click.Path(exists=True, file_okay=True, path_type=Path))
def inspect_plugin(as_json: bool, directory: Path) -> None:
    """Check a plugin's mnemon-source.yaml and its compatibility with this mnemon."""
    report = inspect_manifest(directory)
    value: dict[str, Any] = {
        "valid": report.valid,
        "manifest_path": str(report.path),
        "manifest_digest": report.digest,
        "id": report.plugin_id or None,
        "version": report.version or None,
        "plugin_api_version": report.plugin_api,
        "compatibility": {
            key: {"range": r, "version": v, "compatible": ok}
            for key, (r, v, ok) in report.compatibility.items()
        },
        "issues": [{"code": i.code, "path": i.path, "message": i.message} for i in report.issues],
    }
    if as_json:
        click.echo(json.dumps(value, indent=2))
    else:
        title = f"{report.plugin_id or '?'} {report.version}".strip()
        click.echo(f"{title}: {'valid' if report.valid else 'invalid'}")
        for key, entry in value["compatibility"].items():
            verdict = "compatible" if entry["compatible"] else "incompatible"
            click.echo(f"  {key} {entry['range']!r}: {verdict} ({entry['version']})")
        for issue in report.issues:
            click.echo(f"  {issue.code} at {issue.path}: {issue.message}")
    sys.exit(0 if report.valid else 1)


@plugin_command.command(name="test")
@click.option("--endpoint", help="Test a running plugin at this base URL instead of launching it.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the JSON contract report to this file.",
)
@click.option(
    "--fixture",
    "fixtures",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A fixture to drive, besides the plugin's fixtures/*.json (repeatable).",
)
@click.option(
    "--startup-timeout",
    type=click.FloatRange(0, 300, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a launched plugin may take to answer HTTP.",
)
@click.argument("directory", type=click.Path(exists=True, file_okay=True, path_type=Path))
def test_plugin(
    endpoint: str | None,
    report_path: Path | None,
    fixtures: tuple[Path, ...],
    startup_timeout: float,
    directory: Path,
) -> None:
    """Launch (or reach) a plugin and certify it against protocol v0."""
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise click.BadParameter("must be an http(s) URL", param_hint="--endpoint")

    async def run() -> dict[str, Any]:
        return await certify(
            directory,
            endpoint=endpoint,
            fixtures=list(fixtures),
            startup_timeout=startup_timeout,
            plugin_output=sys.stderr.buffer,
        )

    report = anyio.run(run)
    plugin = report["plugin"]
    click.echo(f"{plugin.get('id', '?')} {plugin.get('version', '')}".rstrip())
    for check in report["checks"]:
        line = f"  {_MARKS[check['status']]} {check['id']}: {check['title']}"
        if check.get("note"):
            line += f" ({check['note']})"
        click.echo(line)
        for issue in check["issues"]:
            click.echo(f"       {issue['code']} at {issue['path']}: {issue['message']}")
    summary = report["summary"]
    verdict = "certified" if report["certified"] else "NOT certified"
    click.echo(
        f"{verdict}: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['skipped']} skipped"
    )
    if report_path is not None:
        report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    sys.exit(0 if report["certified"] else 1)
