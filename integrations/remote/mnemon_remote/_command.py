"""`mnemon plugin inspect|test|dev`: the contract runner on the command line.

A manifest is judged by its content, not its file name: a folder names its manifest by the
usual name (`mnemon-source.yaml`, or the one a contract runner names), a file may be called
anything. A mnemon remote manifest declares a `source`; a manifest of another contract is judged
by the runner that claims it, found among every runner of the `mnemon.contract_runners` entry
points: each says which manifest file it judges (`manifest_name`) and which content
(`judges(document)`, given the file's top-level mapping).

Exit codes: 0 valid (inspect) or certified (test), 1 invalid or not certified, 2 usage error.
The human report goes to stdout, the plugin's own output to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import click

from mnemon.sdk import DefinitionError, parse_yaml

from ._develop import POLL_SECONDS, DevelopmentSession, develop, open_remote_development
from ._launch import MNEMON_RUN
from ._manifest import MANIFEST_NAME, inspect_manifest
from ._report import check_lines
from ._runner import certify

__all__ = ["plugin_command"]

# the runners other distributions bring, found by entry point: one plugin distribution never
# imports another
RUNNERS = "mnemon.contract_runners"
# contracts whose runner another distribution brings, named so a missing one can be installed;
# a hint only: the installed runners are what judges
WELL_KNOWN = {"quivr-plugin.yaml": ("contributions", "mnemon-strategy-quivr")}
# a manifest is read whole to tell its kind; no manifest is anywhere near this
MAX_MANIFEST_BYTES = 1_048_576


class _CannotJudge(click.ClickException):
    exit_code = 2  # a usage error, not a verdict on the plugin


def _document(path: Path) -> Mapping[str, Any] | None:
    """The manifest file's top-level mapping, or None when it cannot be read as one.

    None when it cannot be read as YAML, or is not a mapping: its inspector says why.
    """
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_MANIFEST_BYTES + 1)
        value = parse_yaml(raw.decode("utf-8")) if len(raw) <= MAX_MANIFEST_BYTES else None
    except (OSError, UnicodeDecodeError, DefinitionError):
        return None
    return value if isinstance(value, Mapping) else None


def _installed_runners() -> list[Any]:
    """Every runner of the group with the shape this command drives; a broken one is skipped."""
    runners = []
    for entry in metadata.entry_points(group=RUNNERS):
        try:
            runner = entry.load()
        except Exception:  # a broken distribution must not stop the others from judging
            continue
        if isinstance(getattr(runner, "manifest_name", None), str) and all(
            callable(getattr(runner, name, None)) for name in ("inspect", "certify", "develop")
        ):
            runners.append(runner)
    return runners


def _claims(runner: Any, document: Mapping[str, Any]) -> bool:
    judges = getattr(runner, "judges", None)
    try:
        return bool(judges(document)) if callable(judges) else False
    except Exception:  # a predicate that fails claims nothing
        return False


def _runner_for(path: Path) -> Any | None:
    """The installed runner that judges `path` (a folder, or a manifest file), or None.

    None: a mnemon remote manifest, judged by this distribution itself.

    Raises:
        _CannotJudge: the folder holds the manifests of two contracts, or the manifest is of a
            contract whose runner is not installed.
    """
    runners = _installed_runners()
    if path.is_dir():
        others = sorted(({r.manifest_name for r in runners} | set(WELL_KNOWN)) - {MANIFEST_NAME})
        present = [name for name in (MANIFEST_NAME, *others) if (path / name).is_file()]
        if len(present) > 1:
            raise _CannotJudge(f"the folder holds both {' and '.join(present)}: name one of them")
        if not present or present == [MANIFEST_NAME]:
            return None
        return _named(runners, present[0], path)
    document = _document(path)
    if document is not None:
        if "source" in document:
            return None
        for runner in runners:
            if _claims(runner, document):
                return runner
        for name, (key, _) in WELL_KNOWN.items():
            if key in document:
                return _missing(name, path)
    # a file that says nothing of any contract goes by its name, and its inspector says what
    # is wrong
    if path.name in {r.manifest_name for r in runners} | set(WELL_KNOWN):
        return _named(runners, path.name, path)
    return None


def _named(runners: list[Any], name: str, path: Path) -> Any:
    for runner in runners:
        if runner.manifest_name == name:
            return runner
    return _missing(name, path)


def _missing(name: str, path: Path) -> Any:
    distribution = WELL_KNOWN[name][1]
    raise _CannotJudge(
        f"{path.name} is a {name} manifest; judging it needs {distribution}, "
        f"which is not installed: pip install {distribution}"
    )


@click.group(name="plugin")
def plugin_command() -> None:
    """Inspect, certify and develop remote Source plugins and Quivr plugins (protocol v0)."""


@plugin_command.command(name="inspect")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.argument("directory", type=click.Path(exists=True, file_okay=True, path_type=Path))
def inspect_plugin(as_json: bool, directory: Path) -> None:
    """Check a plugin manifest and its compatibility: a folder, or the manifest file itself.

    The file may have any name: a Quivr manifest (it declares contributions) is judged by
    Quivr's contract and lists which of its Contributions mnemon hosts.
    """
    runner = _runner_for(directory)
    if runner is not None:
        _show_inspection(runner.inspect(directory), as_json)
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
    _show_inspection(value, as_json)


def _show_inspection(value: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(value, indent=2))
    else:
        title = f"{value['id'] or '?'} {value['version'] or ''}".strip()
        click.echo(f"{title}: {'valid' if value['valid'] else 'invalid'}")
        for key, entry in value["compatibility"].items():
            verdict = "compatible" if entry["compatible"] else "incompatible"
            click.echo(f"  {key} {entry['range']!r}: {verdict} ({entry['version']})")
        for issue in value["issues"]:
            click.echo(f"  {issue['code']} at {issue['path']}: {issue['message']}")
        _show_hosting(value)
    sys.exit(0 if value["valid"] else 1)


def _show_hosting(value: dict[str, Any]) -> None:
    """The Contributions of a valid plugin: each hosted or not, and what it becomes or why."""
    listed = value.get("contributions") or []
    if not value["valid"] or not listed:
        return
    click.echo("  contributions:")
    for entry in listed:
        verdict = "hosted" if entry["hosted"] else "not hosted"
        click.echo(f"    {entry['name']}: {verdict} ({entry['reason']})")
    if value.get("hosted"):
        click.echo(f"  mnemon speaks Plugin API {value['hosted_plugin_api_version']} with it")
    else:
        click.echo(
            "  mnemon hosts none of its Contributions: a valid plugin, of which mnemon can run "
            "nothing"
        )


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
@click.option(
    "--token-env",
    default=MNEMON_RUN.token_variable,
    show_default=True,
    help="With --endpoint: the environment variable holding the plugin's caller secret.",
)
@click.argument("directory", type=click.Path(exists=True, file_okay=True, path_type=Path))
def test_plugin(
    endpoint: str | None,
    report_path: Path | None,
    fixtures: tuple[Path, ...],
    startup_timeout: float,
    token_env: str,
    directory: Path,
) -> None:
    """Launch (or reach) a plugin and certify it against protocol v0 (or Quivr's)."""
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise click.BadParameter("must be an http(s) URL", param_hint="--endpoint")
    directory = directory.absolute()  # `mnemon plugin test .` names the folder it runs in
    runner = _runner_for(directory)
    options: dict[str, Any] = {}
    if runner is None and endpoint is not None:
        token = os.environ.get(token_env)
        if not token:
            raise _CannotJudge(
                f"--endpoint needs the plugin's caller secret: set {token_env} to the value the "
                "plugin was started with (MNEMON_PLUGIN_TOKEN in its environment)"
            )
        options["token"] = token

    async def run() -> dict[str, Any]:
        return await (certify if runner is None else runner.certify)(
            directory,
            endpoint=endpoint,
            fixtures=list(fixtures),
            startup_timeout=startup_timeout,
            plugin_output=sys.stderr.buffer,
            **options,
        )

    report = anyio.run(run)
    plugin = report["plugin"]
    click.echo(f"{plugin.get('id', '?')} {plugin.get('version', '')}".rstrip())
    for check in report["checks"]:
        for line in check_lines(check):
            click.echo(line)
    summary = report["summary"]
    verdict = "certified" if report["certified"] else "NOT certified"
    click.echo(
        f"{verdict}: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['skipped']} skipped"
    )
    if report_path is not None:
        report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    sys.exit(0 if report["certified"] else 1)


@plugin_command.command(name="dev")
@click.option(
    "--fixture",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay this fixture after the plugin starts, print its answer, exit 0 or 1.",
)
@click.option(
    "--watch", is_flag=True, help="With --fixture: keep running, and restart on every change."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), help="The loopback port (default: a free one)."
)
@click.option(
    "--startup-timeout",
    type=click.FloatRange(0, 300, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds the plugin may take to answer GET /v0/health.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(0.01, 60),
    default=POLL_SECONDS,
    show_default=True,
    envvar="MNEMON_PLUGIN_DEV_POLL",
    show_envvar=True,
    help="Seconds between two looks at the plugin's folder for changes.",
)
@click.argument("directory", type=click.Path(exists=True, file_okay=True, path_type=Path))
def dev_plugin(
    fixture: Path | None,
    watch: bool,
    port: int | None,
    startup_timeout: float,
    poll_interval: float,
    directory: Path,
) -> None:
    """Run a plugin while you write it: launched, checked, restarted when its files change.

    Inspects the manifest, starts run.command by the plugin's run convention (its own process
    group, 127.0.0.1 and a port), waits for GET /v0/health and checks GET /v0/discovery
    against the manifest. With --fixture it replays the fixture through the checks `mnemon
    plugin test` uses, prints the answer and exits 0 (every check passed) or 1. Without
    --fixture, or with --watch, it keeps running and restarts the plugin when a file of its
    folder changes (hidden folders, __pycache__, virtual environments and build outputs
    aside); Ctrl-C or SIGTERM stops it: SIGTERM to the plugin's group, SIGKILL after 5 s.
    """
    directory = directory.absolute()
    runner = _runner_for(directory)
    session: DevelopmentSession
    if runner is not None:
        session = runner.develop(
            directory, fixture=fixture, startup_timeout=startup_timeout, port=port
        )
    else:
        session = open_remote_development(
            directory, fixture=fixture, startup_timeout=startup_timeout, port=port
        )
    folder = directory if directory.is_dir() else directory.parent
    # a signal ends a session that runs until stopped; it interrupts a single replay
    stopped = 0 if fixture is None or watch else 1

    async def run() -> int:
        status = stopped
        async with anyio.create_task_group() as group:

            async def main() -> None:
                nonlocal status
                status = await develop(
                    session,
                    folder,
                    fixture=fixture,
                    watch=watch,
                    poll_interval=poll_interval,
                    echo=click.echo,
                )
                group.cancel_scope.cancel()

            async def signals() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                    async for _ in received:
                        click.echo("stopping the plugin")
                        group.cancel_scope.cancel()
                        return

            group.start_soon(signals)
            group.start_soon(main)
        return status

    sys.exit(anyio.run(run))
