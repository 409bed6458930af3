"""`mnemon plugin inspect|test|dev` asks every installed contract runner which manifest it judges.

A third party's runner is installed the way pip leaves a distribution (a dist-info folder on
the import path) and registered in `mnemon.contract_runners`, as any runner is.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mnemon._cli._commands import cli

PLUGINS = Path(__file__).parent / "plugins"

# a runner of a made-up contract, whose manifests declare `acme` at their top
ACME = textwrap.dedent(
    """
    def inspect(path):
        return {"valid": True, "id": "acme.ranker", "version": "1.0.0", "compatibility": {},
                "issues": [], "judged": path.name}

    async def certify(path, **options):
        raise NotImplementedError

    def develop(path, **options):
        raise NotImplementedError

    class Runner:
        manifest_name = "acme-plugin.yaml"
        distribution = "acme-runner"
        inspect = staticmethod(inspect)
        certify = staticmethod(certify)
        develop = staticmethod(develop)

        @staticmethod
        def judges(document):
            return "acme" in document

    runner = Runner()
    """
)


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The acme runner's distribution installed, beside a broken runner's: the site folder."""
    site = tmp_path / "site"
    for package, body, entry in (
        ("acme_runner", ACME, "acme = acme_runner:runner"),
        ("broken_runner", "raise RuntimeError('broken')\n", "broken = broken_runner:runner"),
    ):
        (site / package).mkdir(parents=True)
        (site / package / "__init__.py").write_text(body, encoding="utf-8")
        info = site / f"{package}-1.0.dist-info"
        info.mkdir()
        name = package.replace("_", "-")
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[mnemon.contract_runners]\n{entry}\n", encoding="utf-8"
        )
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("acme_runner", None)


def inspect(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plugin", "inspect", *arguments], prog_name="mnemon")
    return result.exit_code, result.output


def test_a_manifest_file_of_any_name_goes_to_the_runner_that_claims_its_content(
    acme: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "theirs.yaml"
    manifest.write_text("acme:\n  kind: ranker\n", encoding="utf-8")
    status, output = inspect("--json", str(manifest))
    assert status == 0, output
    value = json.loads(output)
    assert (value["id"], value["judged"]) == ("acme.ranker", "theirs.yaml")
    # a mnemon remote manifest is still this distribution's own
    status, output = inspect("--json", str(PLUGINS / "notes"))
    assert (status, json.loads(output)["id"]) == (0, "example.notes")


def test_a_folder_goes_to_the_runner_whose_manifest_it_holds(acme: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "acme-plugin.yaml").write_text("acme: {}\n", encoding="utf-8")
    status, output = inspect("--json", str(folder))
    assert status == 0, output
    assert json.loads(output)["judged"] == "plugin"
    (folder / "mnemon-source.yaml").write_text("source: {}\n", encoding="utf-8")
    status, output = inspect(str(folder))
    assert status == 2
    assert "holds both mnemon-source.yaml and acme-plugin.yaml: name one of them" in output


def test_without_a_runner_claiming_it_the_manifest_is_judged_as_a_remote_source(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "theirs.yaml"
    manifest.write_text("acme:\n  kind: ranker\n", encoding="utf-8")
    status, output = inspect("--json", str(manifest))
    assert status == 1
    value = json.loads(output)
    assert value["valid"] is False
    assert value["issues"]
