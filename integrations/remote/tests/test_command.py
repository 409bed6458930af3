"""`mnemon plugin inspect` and `mnemon plugin test` from the user's side: a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner
from mnemon_remote._report import report_validator

from mnemon._cli._commands import cli

PLUGINS = Path(__file__).parent / "plugins"
MNEMON = str(Path(sys.executable).parent / "mnemon")


def _mnemon(
    *args: str, cwd: Path | None = None, **variables: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **variables,
    }
    return subprocess.run(
        [MNEMON, "plugin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        cwd=cwd,
        check=False,
    )


def test_mnemon_plugin_is_this_distributions_verb_found_by_entry_point() -> None:
    from mnemon_remote import plugin_command

    with cli.make_context("mnemon", ["plugin"]) as context:
        assert cli.get_command(context, "plugin") is plugin_command
    listed = CliRunner().invoke(cli, ["--help"])
    assert listed.exit_code == 0
    assert "  plugin " in listed.output
    helped = CliRunner().invoke(cli, ["plugin", "--help"], prog_name="mnemon")
    assert helped.exit_code == 0
    assert "Usage: mnemon plugin [OPTIONS] COMMAND [ARGS]..." in helped.output
    for verb in ("inspect", "test", "dev"):
        assert f"  {verb} " in helped.output


def test_inspect_a_valid_manifest() -> None:
    result = _mnemon("inspect", "--json", str(PLUGINS / "notes"))
    assert result.returncode == 0, result.stderr
    value = json.loads(result.stdout)
    assert value["valid"] is True
    assert value["id"] == "example.notes"
    assert value["plugin_api_version"] == "0.2.0"
    assert value["compatibility"]["plugin_api"]["compatible"] is True


def test_inspect_an_invalid_manifest_names_every_issue(tmp_path: Path) -> None:
    manifest = yaml.safe_load(
        (PLUGINS / "notes" / "mnemon-source.yaml").read_text(encoding="utf-8")
    )
    manifest["compatibility"]["plugin_api"] = ">=2.0.0 <1.0.0"
    manifest["secrets"] = [{"name": "lower_case"}]
    (tmp_path / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    result = _mnemon("inspect", str(tmp_path))
    assert result.returncode == 1
    assert "invalid" in result.stdout
    assert "secrets[0].name" in result.stdout
    result = _mnemon("inspect", "--json", str(tmp_path))
    manifest["secrets"] = []
    (tmp_path / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    result = _mnemon("inspect", "--json", str(tmp_path))
    assert result.returncode == 1
    assert [i["code"] for i in json.loads(result.stdout)["issues"]] == ["invalid_range"]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _mnemon("inspect", str(tmp_path / "missing")).returncode == 2
    assert _mnemon("test", "--endpoint", "ftp://x", str(PLUGINS / "notes")).returncode == 2
    assert _mnemon("test", "--startup-timeout", "0", str(PLUGINS / "notes")).returncode == 2


def test_plugin_test_certifies_and_writes_the_report(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = _mnemon("test", "--report", str(report_path), str(PLUGINS / "notes"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "certified: 10 passed, 0 failed, 0 skipped" in result.stdout
    report = json.loads(report_path.read_text(encoding="utf-8"))
    report_validator().validate(report)
    assert report["certified"] is True


def test_plugin_test_exits_1_when_not_certified(tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    shutil.copytree(PLUGINS / "notes", folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = yaml.safe_load((folder / "mnemon-source.yaml").read_text(encoding="utf-8"))
    manifest["run"]["command"] = [
        sys.executable,
        str(PLUGINS / "broken" / "serve_broken.py"),
        "credentials",
    ]
    (folder / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    result = _mnemon("test", str(folder))
    assert result.returncode == 1
    assert "NOT certified" in result.stdout
    assert "credential_leak" in result.stdout
    # the plugin's own output goes to stderr, never into the human report
    assert "starting with token" in result.stderr
    assert "starting with token" not in result.stdout


def test_inspect_names_a_bad_source_field(tmp_path: Path) -> None:
    manifest = yaml.safe_load(
        (PLUGINS / "notes" / "mnemon-source.yaml").read_text(encoding="utf-8")
    )
    manifest["source"]["routes"][0]["capability"] = "forget"
    (tmp_path / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    result = _mnemon("inspect", "--json", str(tmp_path))
    assert result.returncode == 1
    issues = json.loads(result.stdout)["issues"]
    assert [i["code"] for i in issues] == ["invalid_source"]
    assert "'forget' is not among the manifest's capabilities" in issues[0]["message"]


def test_plugin_test_of_the_folder_it_runs_in(tmp_path: Path) -> None:
    """`mnemon plugin test .`, as the docs write it: a relative folder, no traceback."""
    folder = tmp_path / "plugin"
    shutil.copytree(PLUGINS / "notes", folder, ignore=shutil.ignore_patterns("__pycache__"))
    result = _mnemon("test", ".", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "certified: 10 passed, 0 failed, 0 skipped" in result.stdout
    inspected = _mnemon("inspect", ".", cwd=folder)
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr


def test_plugin_test_of_an_endpoint_needs_its_caller_secret() -> None:
    variables = {"MNEMON_PLUGIN_TOKEN": ""}
    result = _mnemon(
        "test", "--endpoint", "http://127.0.0.1:9", str(PLUGINS / "notes"), **variables
    )
    assert result.returncode == 2
    assert "caller secret: set MNEMON_PLUGIN_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr


def _inspect_in_process(path: Path) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["plugin", "inspect", "--json", str(path)])
    return result.exit_code, json.loads(result.output)


def test_a_manifest_is_judged_by_its_content_not_its_name(tmp_path: Path) -> None:
    text = (PLUGINS / "notes" / "mnemon-source.yaml").read_bytes()
    renamed = tmp_path / "plugin.yaml"
    renamed.write_bytes(text)
    status, value = _inspect_in_process(renamed)
    assert (status, value["valid"], value["id"]) == (0, True, "example.notes")
    assert value["plugin_api_version"] == "0.2.0"  # mnemon's protocol, not Quivr's
    # a mnemon manifest under Quivr's usual name is still a mnemon manifest
    misnamed = tmp_path / "quivr-plugin.yaml"
    misnamed.write_bytes(text)
    status, value = _inspect_in_process(misnamed)
    assert (status, value["id"], value["plugin_api_version"]) == (0, "example.notes", "0.2.0")
    # a file of neither kind goes to mnemon's inspector, which says what is wrong
    (tmp_path / "other.yaml").write_text("id: x\n", encoding="utf-8")
    status, value = _inspect_in_process(tmp_path / "other.yaml")
    assert status == 1
    assert value["issues"][0]["code"] == "schema_violation"
