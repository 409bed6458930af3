"""The `mnemon` command end to end, in a temporary folder, as a user runs it."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

MNEMON = str(Path(sys.executable).parent / "mnemon")


def environment(cwd: Path, **extra: str) -> dict[str, str]:
    """The environment `mnemon` runs in: its home under `cwd`, no colors, no outside profile."""
    variables = {**os.environ, "MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1", **extra}
    variables.pop("MNEMON_PROFILE", None)
    return variables


def mnemon(
    cwd: Path, *arguments: str | bytes, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run `mnemon --no-color ARGUMENTS` in `cwd`; `extra` adds environment variables.

    The command runs in this process (`main()`, as the console script calls it), in `cwd`,
    with the environment, standard streams and import path a process would have, all put
    back afterwards: a new interpreter per command would cost most of the suite's time.
    Byte arguments (not text a shell could pass in-process) and `MNEMON_TEST_PROCESSES=1`
    run the real executable instead.
    """
    if os.environ.get("MNEMON_TEST_PROCESSES") == "1" or any(
        isinstance(argument, bytes) for argument in arguments
    ):
        return subprocess.run(
            [MNEMON, "--no-color", *arguments],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=environment(cwd, **extra),
        )
    return run_in_process(cwd, [str(a) for a in arguments], stdin, environment(cwd, **extra))


def run_in_process(
    cwd: Path, arguments: list[str], stdin: str | None, variables: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`mnemon --no-color ARGUMENTS` through `main()` in this process, as a process would see it."""
    from mnemon._cli._commands import main

    # streams with a `buffer`, as a process's are
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") for _ in "oe")
    saved = (os.getcwd(), dict(os.environ), list(sys.path), sys.stdin, sys.stdout, sys.stderr)
    # what a fresh process prints for a warning nobody handles (logging's last resort)
    last_resort = logging.StreamHandler(err)
    last_resort.setLevel(logging.WARNING)
    root = logging.getLogger()
    # `--debug` sets mnemon's logger to DEBUG and gives it a handler: that process's alone
    library = logging.getLogger("mnemon")
    library_state = (library.level, list(library.handlers))
    status: object = 0
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(variables)
        if "PYTHONPATH" in variables:
            sys.path[:0] = variables["PYTHONPATH"].split(os.pathsep)
        given = io.BytesIO((stdin or "").encode("utf-8"))
        sys.stdin = io.TextIOWrapper(given, encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        root.addHandler(last_resort)
        try:
            main(["--no-color", *arguments])
        except SystemExit as exit:
            status = exit.code
    finally:
        root.removeHandler(last_resort)
        library.setLevel(library_state[0])
        library.handlers[:] = library_state[1]
        cwd_before, environ, path, sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(cwd_before)
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        # a module imported from the command's own import path is that process's alone
        added = [Path(folder) for folder in variables.get("PYTHONPATH", "").split(os.pathsep)]
        for name, module in list(sys.modules.items()):
            where = getattr(module, "__file__", None)
            if where and any(
                Path(where).is_relative_to(folder) for folder in added if folder.parts
            ):
                del sys.modules[name]
    code = status if isinstance(status, int) else (0 if status is None else 1)
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess([MNEMON, "--no-color", *arguments], code, *texts)


def start(cwd: Path, *arguments: str, **extra: str) -> subprocess.Popen[str]:
    """`mnemon --no-color ARGUMENTS` running in the background in `cwd`, its streams piped."""
    return subprocess.Popen(
        [MNEMON, "--no-color", *arguments],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(cwd, **extra),
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("project")
    result = mnemon(folder, "init", "--embedder", "none")
    assert result.returncode == 0, result.stderr
    return folder


def test_init_writes_a_starter_profile_and_keeps_an_existing_one(project: Path) -> None:
    text = (project / "mnemon.toml").read_text(encoding="utf-8")
    for plugin in ("runtime", "documents", "spaces", "layered", "scoped", "light-context",
                   "auto-capture"):  # fmt: skip
        assert f'\nplugin = "{plugin}"\n' in text
    assert "\nuse = " not in text.split("[[entries]]", 1)[1]  # by id, not by import path
    assert text.count("enabled = false") == 3
    again = mnemon(project, "init")
    assert again.returncode == 1
    assert "exists; use --force" in again.stderr


def test_view_prints_the_wake_and_json(project: Path) -> None:
    shown = mnemon(project, "view", "--user", "ada", "--workspace", "w1")
    assert shown.returncode == 0, shown.stderr
    assert "## Memory" in shown.stdout
    assert "source:spaces/recall" in shown.stdout
    as_json = mnemon(project, "view", "--user", "ada", "--json")
    view = json.loads(as_json.stdout)
    assert view["id"].startswith("view:")
    assert view["request"]["scope"]["user_id"] == "ada"
    # without --workspace the documents Source says why it is absent
    assert any(d["code"] == "source-unavailable" for d in view["diagnostics"])


def test_remember_needs_an_explicit_authorization(project: Path) -> None:
    refused = mnemon(project, "remember", "Ada prefers tea.", "--user", "ada", stdin="n\n")
    assert refused.returncode == 1
    assert "Error: nothing was changed: you did not confirm" in refused.stderr
    assert "Ada prefers tea" not in mnemon(project, "recall", "tea", "--user", "ada").stdout
    written = mnemon(
        project, "remember", "Ada prefers green tea.", "--user", "ada", "--tag", "drinks", "--yes"
    )
    assert written.returncode == 0, written.stderr
    assert "committed / succeeded" in written.stdout
    asked = mnemon(project, "remember", "Ada likes rye bread.", "--user", "ada", stdin="y\n")
    assert asked.returncode == 0, asked.stderr
    assert "Write this memory through source:spaces/remember?" in asked.stdout


def test_recall_finds_only_what_this_identity_remembered(project: Path) -> None:
    mnemon(project, "remember", "Bob collects stamps.", "--user", "bob", "--yes")
    mine = mnemon(project, "recall", "stamps", "--user", "bob")
    assert mine.returncode == 0, mine.stderr
    assert "Bob collects stamps." in mine.stdout
    theirs = mnemon(project, "recall", "stamps", "--user", "carol")
    assert "Bob collects stamps." not in theirs.stdout
    as_json = json.loads(mnemon(project, "recall", "stamps", "--user", "bob", "--json").stdout)
    assert as_json["items"][0]["text"] == "Bob collects stamps."


def test_view_with_a_query_also_runs_its_reads(project: Path) -> None:
    mnemon(project, "remember", "Dana plays the cello.", "--user", "dana", "--yes")
    shown = mnemon(project, "view", "cello", "--user", "dana", "--workspace", "w1")
    assert shown.returncode == 0, shown.stderr
    assert "source:spaces/recall: 1 item(s)" in shown.stdout
    assert "source:documents/search" in shown.stdout


def test_inspect_reports_what_serves(project: Path) -> None:
    shown = mnemon(project, "inspect")
    assert shown.returncode == 0, shown.stderr
    assert "state: serving" in shown.stdout
    assert "strategy:layered" in shown.stdout
    report = json.loads(mnemon(project, "inspect", "--json").stdout)
    assert {s["key"] for s in report["serving"]["sources"]} == {
        "source:runtime",
        "source:documents",
        "source:spaces",
    }
    # shown relative to the profile's folder: an absolute path can carry a secret
    assert report["data_dir"] == ".mnemon"


def test_a_bad_profile_is_a_clear_one_line_error(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (tmp_path / "mnemon.toml").write_text('[[entries]]\nid = "a"\nuse = 5\n', encoding="utf-8")
    result = mnemon(tmp_path, "inspect")
    assert result.returncode == 1
    assert "entries[0].use: Input should be a valid string (line 3)" in result.stderr
    assert "Traceback" not in result.stderr
    empty = tmp_path_factory.mktemp("empty")  # not below tmp_path, whose profile it would find
    missing = mnemon(empty, "view")
    assert missing.returncode == 1
    assert "no profile here (create one with `mnemon init`)" in missing.stderr


def test_the_demo_runs_and_is_safe_to_rerun(tmp_path: Path) -> None:
    # a folder an earlier demo made, before it marked its folders, is still the demo's
    earlier = tmp_path / ".mnemon-demo"
    assert mnemon(tmp_path, "--profile", str(earlier / "mnemon.toml"), "init").returncode == 0
    profile = earlier / "mnemon.toml"
    profile.write_text(
        profile.read_text(encoding="utf-8").replace('data_dir = ".mnemon"', 'data_dir = "data"'),
        encoding="utf-8",
    )
    (earlier / "data").mkdir()
    for _ in range(2):
        result = mnemon(tmp_path, "demo")
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "seeded 3 working-memory entries, 3 documents and 4 long-term memories" in out
        assert "## Memory" in out
        assert "committed / succeeded" in out
        assert "the new memory is recalled" in out
        assert "Timings" in out
    assert (tmp_path / ".mnemon-demo" / "mnemon.toml").exists()


def test_the_tenant_flag_separates_memories_of_the_same_user(project: Path) -> None:
    stored = mnemon(
        project, "remember", "Acme invoices close on the 3rd.", "--user", "ada",
        "--tenant", "acme", "--yes",
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    mine = mnemon(project, "recall", "invoices", "--user", "ada", "--tenant", "acme")
    assert "Acme invoices close" in mine.stdout
    for other in (("--tenant", "globex"), ()):
        theirs = mnemon(project, "recall", "invoices", "--user", "ada", *other)
        assert theirs.returncode == 0, theirs.stderr
        assert "Acme invoices" not in theirs.stdout
