"""Verbs installed distributions add to `mnemon` through the `mnemon.commands` entry points.

Each distribution is installed the way pip leaves one (a dist-info folder on `PYTHONPATH`), and
`mnemon` runs as a user runs it.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from .test_cli import mnemon
from .test_discovery import RAISES_ON_IMPORT, SECRET, fake_distribution

# a third party's verb: it sees the `mnemon -p PROFILE` flag through the context, as core verbs do
GREETER = textwrap.dedent(
    """
    import click

    @click.command()
    @click.argument("name")
    @click.pass_context
    def greet(ctx, name):
        \"\"\"Greet NAME from a third-party distribution.\"\"\"
        click.echo(f"hello {name}; profile flag: {ctx.obj['profile']}")

    not_a_command = "greet"
    """
)


def install(site: Path, package: str, body: str, commands: str, summary: str) -> None:
    """A distribution `package` whose `mnemon.commands` entry points are `commands` (lines)."""
    fake_distribution(
        site,
        module_body=body,
        plugin_id=package.replace("_", "."),
        package=package,
        entry_points=f"[mnemon.commands]\n{commands}\n",
        summary=summary,
    )


def test_an_installed_verb_is_listed_and_runs_with_the_global_flags(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, "greeter", GREETER, "greet = greeter:greet", "Greetings for mnemon users")
    listed = mnemon(tmp_path, "--help", PYTHONPATH=str(site))
    assert listed.returncode == 0, listed.stderr
    [line] = [line for line in listed.stdout.splitlines() if line.strip().startswith("greet ")]
    assert "Greetings for mnemon users" in line
    ran = mnemon(tmp_path, "-p", "elsewhere.toml", "greet", "ada", PYTHONPATH=str(site))
    assert (ran.returncode, ran.stdout) == (0, "hello ada; profile flag: elsewhere.toml\n")
    helped = mnemon(tmp_path, "greet", "--help", PYTHONPATH=str(site))
    assert "Usage: mnemon greet [OPTIONS] NAME" in helped.stdout
    assert "Greet NAME from a third-party distribution." in helped.stdout
    # without the distribution there is no such verb
    missing = mnemon(tmp_path, "greet", "ada")
    assert missing.returncode == 2
    assert "No such command 'greet'" in missing.stderr


def test_a_broken_verb_is_one_line_naming_its_entry_point_and_the_others_still_work(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    install(site, "exploding", RAISES_ON_IMPORT, "explode = exploding:command", "Explodes")
    install(site, "greeter", GREETER, "wrong = greeter:not_a_command", "Greetings")
    # listing the verbs imports none of them
    listed = mnemon(tmp_path, "--help", PYTHONPATH=str(site))
    assert listed.returncode == 0, listed.stderr
    assert "explode " in listed.stdout
    assert "wrong " in listed.stdout
    for verb, why in (
        ("explode", "explode = exploding:command (exploding) failed to import (RuntimeError)"),
        ("wrong", "wrong = greeter:not_a_command (greeter) does not name a click command"),
    ):
        for arguments in ((verb,), (verb, "--help", "x")):
            failed = mnemon(tmp_path, *arguments, PYTHONPATH=str(site))
            assert failed.returncode == 1
            assert failed.stdout == ""
            assert failed.stderr.count("\n") == 1, failed.stderr
            assert f"the command '{verb}' cannot be loaded: entry point {why}" in failed.stderr
            assert "Traceback" not in failed.stderr
            assert SECRET not in failed.stderr
    as_json = mnemon(tmp_path, "explode", "--json", PYTHONPATH=str(site))
    error = json.loads(as_json.stdout)["error"]
    assert (error["code"], error["exit_code"]) == ("broken-command", 1)
    started = mnemon(tmp_path, "init", "--embedder", "none", PYTHONPATH=str(site))
    assert started.returncode == 0, started.stderr


def test_a_distribution_cannot_replace_a_core_verb(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, "exploding", RAISES_ON_IMPORT, "init = exploding:command", "Takes init")
    listed = mnemon(tmp_path, "--help", PYTHONPATH=str(site))
    assert [line for line in listed.stdout.splitlines() if "Takes init" in line] == []
    started = mnemon(tmp_path, "init", "--embedder", "none", PYTHONPATH=str(site))
    assert started.returncode == 0, started.stderr
    assert (tmp_path / "mnemon.toml").is_file()


def test_facts_and_docs_come_from_the_distributions_of_their_sources(tmp_path: Path) -> None:
    from mnemon._cli._commands import cli

    listed = mnemon(tmp_path, "--help")
    assert listed.returncode == 0, listed.stderr
    for verb, distribution in (
        ("facts", "mnemon-source-runtime"),
        ("docs", "mnemon-source-documents"),
    ):
        assert verb not in cli.commands  # not one of the core's own verbs
        [point] = importlib.metadata.entry_points(group="mnemon.commands", name=verb)
        assert point.dist is not None
        assert point.dist.name == distribution
        [line] = [
            line for line in listed.stdout.splitlines() if line.strip().startswith(f"{verb} ")
        ]
        # the listing shows the distribution's summary (cut to the terminal's width)
        assert point.dist.metadata["Summary"][:20] in line


def test_importing_the_sources_does_not_import_their_verbs_or_click() -> None:
    code = (
        "import sys, mnemon_source_runtime, mnemon_source_documents; "
        "print(sorted(name for name in sys.modules if name == 'click' or name == 'mnemon.cli' "
        "or name.endswith('._command')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (found.returncode, found.stdout) == (0, "[]\n"), found.stderr
