"""`mnemon plugins`: what discovery finds, where, and whether the profile uses it.

The command shares `discover_plugins` with the host: what it lists is what a profile's
`plugin = "<id>"` can name. It imports no plugin code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .._discovery import DiscoveredPlugin, Discovery, discover_plugins
from .._errors import DefinitionError, MnemonError
from .._profile import load_profile
from .._text import visible_text
from ._options import CommandError, echo_json, error_code, json_option, printer_of, profile_path
from ._paths import shown_path

__all__ = ["plugins", "register"]


def _discovery(ctx: click.Context) -> tuple[Discovery, Path]:
    path = profile_path(ctx)
    discovery = discover_plugins(project_dir=path.parent)
    if path.is_file():  # statuses say what this profile activates
        try:
            uses = load_profile(path).plugin_uses(discovery)
        except MnemonError as exc:  # a broken profile is one error line, as for every command
            raise CommandError(
                visible_text(str(exc), keep_newlines=False), code=error_code(exc)
            ) from None
        discovery = discovery.with_profile(uses)
    return discovery, path.parent


def _location(plugin: DiscoveredPlugin, folder: Path) -> str:
    if plugin.distribution is not None:
        # inside site-packages: the package and file name say enough, the folder is private
        inside = (
            "/".join(plugin.location.parts[-2:]) if plugin.problem != "invalid-manifest" else ""
        )
        return f"{plugin.distribution}:{inside}" if inside else str(plugin.distribution)
    return shown_path(plugin.location, folder)


def _row(plugin: DiscoveredPlugin, folder: Path) -> dict[str, Any]:
    return {
        "id": plugin.id,
        "version": plugin.version,
        "origin": plugin.origin,
        "location": _location(plugin, folder),
        "status": plugin.status,
        "problem": plugin.problem,
        "detail": plugin.detail,
    }


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List the plugins found: bundled, user, project (.mnemon/plugins), installed.

    For each: id, version, origin, location, status (available, active, disabled, shadowed,
    broken, unsupported) and the problem of a broken one. No plugin code is imported.
    """
    if ctx.invoked_subcommand is not None:
        return
    discovery, folder = _discovery(ctx)
    rows = [_row(plugin, folder) for plugin in discovery]
    if as_json:
        echo_json({"plugins": rows})
        return
    printer = printer_of(ctx)
    if not rows:
        printer.line("no plugin found (see `mnemon plugins --help` for where they are looked for)")
        return
    printer.line(_columns("ID", "VERSION", "STATUS", "ORIGIN", "LOCATION"))
    for row in rows:
        problem = f"  {row['problem']}: {row['detail']}" if row["problem"] else ""
        shadow = f"  ({row['detail']})" if row["status"] == "shadowed" else ""
        printer.line(
            _columns(
                row["id"], row["version"] or "-", row["status"], row["origin"], row["location"]
            )
            + problem
            + shadow
        )


def _columns(plugin_id: str, version: str, status: str, origin: str, location: str) -> str:
    return f"{plugin_id:<24} {version:<10} {status:<11} {origin:<11} {location}"


@plugins.command()
@click.argument("plugin_id", metavar="ID")
@json_option
@click.pass_context
def show(ctx: click.Context, plugin_id: str, as_json: bool) -> None:
    """Print a plugin's manifest: what it provides, what it requires, its configuration schema."""
    discovery, folder = _discovery(ctx)
    found = [plugin for plugin in discovery if plugin.id == plugin_id]
    if not found:
        try:
            discovery.resolve(plugin_id, where="plugins show")
        except DefinitionError as exc:
            raise CommandError(str(exc), code="unknown-plugin") from None
    plugin = found[0]
    document: dict[str, Any] = {
        **_row(plugin, folder),
        "manifest": plugin.manifest.as_json() if plugin.manifest is not None else None,
        "shadowed": [_row(other, folder) for other in found[1:]],
    }
    if as_json:
        echo_json(document)
        return
    printer = printer_of(ctx)
    manifest = plugin.manifest
    printer.heading(f"{plugin.id} {plugin.version or ''}".strip())
    for key in ("status", "origin", "location"):
        printer.field(key, document[key])
    if plugin.problem:
        printer.field("problem", f"{plugin.problem}: {plugin.detail}")
    if manifest is None:
        return
    printer.field("name", manifest.display_name)
    printer.field("description", manifest.description)
    printer.field("requires", f"{manifest.format} {manifest.requires or '(any version)'}")
    for entry in manifest.as_json()["entries"]:
        host = manifest.hosted_by
        if manifest.format != "mnemon":
            # another format's contribution is used by name in its host's entry, not mounted
            kind = host.kind if host is not None else f"{manifest.format} contribution"
            how = ""
            if not entry["supported"]:
                how = f" (unsupported: install {host.distribution})" if host else " (unsupported)"
            what = f"{kind} {entry['name']!r} from {entry['plugin']}{how}"
        else:
            what = f"entry {entry['name']!r} from {entry['plugin']}"
        printer.field("provides", what)
        printer.line("  configuration schema:")
        printer.line("    " + json.dumps(entry["config_schema"], indent=2).replace("\n", "\n    "))
    for other in document["shadowed"]:
        printer.field("shadowed", f"{other['origin']} {other['location']}")


def register(group: click.Group) -> None:
    """Add `mnemon plugins` to `group`."""
    group.add_command(plugins)
