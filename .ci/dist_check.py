"""The packaging gate (`make dist-check`): the distributions as a user installs them.

Every distribution is built as a wheel and installed into a fresh virtual environment outside
the repository (no editable installs, no source paths). In that environment the plugins must be
discovered through their entry points, each must import only what its wheel declares and never
a private `mnemon._*` module, each plugin's own tests run against the installed wheels (copied to
a temporary folder, so the source tree is not on `sys.path`), and `examples/` runs as an external
consumer. In a second fresh environment, `pip install 'mnemon-runtime[cli]'` alone gets a
`mnemon init` that refuses and names the `standard` extra, and after
`pip install 'mnemon-runtime[standard]'` the README's `mnemon init` and `mnemon view` work.
Third-party dependencies come from the package index through pip's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = [
    ROOT,
    *sorted(
        path.parent
        for pattern in (
            "testing",
            "sources/*",
            "strategies/*",
            "examples/*",
            "integrations/*",
            "embedders/*",
        )
        for path in ROOT.glob(f"{pattern}/pyproject.toml")
    ),
]
# what the plugins' tests need besides the wheels themselves
TEST_REQUIREMENTS = [
    "pytest>=8.2",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "hatchling>=1.24",
    # and what a distribution's own `test` extra asks for (its third-party test tools)
    *sorted(
        {
            requirement
            for distribution in DISTRIBUTIONS
            for requirement in tomllib.loads((distribution / "pyproject.toml").read_text())[
                "project"
            ]
            .get("optional-dependencies", {})
            .get("test", [])
            if not requirement.startswith("mnemon")
        }
    ),
]

# runs inside the fresh environment: each installed plugin's imports against its requirements
IMPORT_AUDIT = textwrap.dedent(
    """
    import ast, json, re, sys
    from importlib.metadata import distribution, packages_distributions

    def norm(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    owners = packages_distributions()
    problems = []
    for name in json.loads(sys.argv[1]):
        dist = distribution(name)
        declared = {norm(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in dist.requires or []}
        own = {norm(name)}
        for file in dist.files or []:
            if file.suffix != ".py":
                continue
            tree = ast.parse(file.read_text(encoding="utf-8"))
            top_package = file.parts[0]
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    private = any(p.startswith("_") for p in module.split(".")[1:])
                    if top == "mnemon" and private:
                        problems.append(f"{name}: {file} imports the private module {module}")
                    if top in sys.stdlib_module_names or top in ("__future__", top_package):
                        continue
                    # an editable core lists no files: its import name is known
                    fallback = ["mnemon-runtime"] if top == "mnemon" else [top]
                    providers = {norm(d) for d in owners.get(top, fallback)}
                    if not providers & (declared | own):
                        problems.append(f"{name}: {file} imports {top!r}, not declared")
    print(json.dumps(problems))
    """
)

PYTEST_INI = """\
[pytest]
addopts = --strict-markers --import-mode=importlib -p no:cacheprovider -q
anyio_mode = auto
filterwarnings = error
timeout = 120
xfail_strict = true
"""


def _run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("$", " ".join(str(arg) for arg in args), flush=True)
    return subprocess.run([str(arg) for arg in args], check=True, text=True, **kwargs)  # type: ignore[call-overload]


def _fail(message: str) -> None:
    print(f"dist-check: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def _project(folder: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))[
        "project"
    ]
    return project


def check_standard_install(work: Path, wheels: Path, env: dict[str, str]) -> None:
    """What a newcomer does in a fresh environment: `[cli]` alone, then `[standard]`.

    With only the command installed, `mnemon init` must refuse (writing nothing) and name
    the `standard` extra; after `pip install 'mnemon-runtime[standard]'`, `mnemon init` and
    `mnemon view` must work with nothing else installed.
    """
    venv, folder = work / "standard-venv", work / "standard"
    _run(sys.executable, "-m", "venv", venv)
    pip: list[str | Path] = [
        venv / "bin" / "python",
        "-m",
        "pip",
        "--disable-pip-version-check",
        "-q",
    ]
    command = venv / "bin" / "mnemon"
    folder.mkdir()
    _run(*pip, "install", "--find-links", wheels, "mnemon-runtime[cli]", env=env)
    refused = subprocess.run(
        [command, "--no-color", "init"], cwd=folder, env=env, capture_output=True, text=True
    )
    if refused.returncode != 1 or "'mnemon-runtime[standard]'" not in refused.stderr:
        _fail(f"mnemon init with only [cli] installed: {refused.returncode} {refused.stderr!r}")
    if (folder / "mnemon.toml").exists():
        _fail("mnemon init with only [cli] installed wrote a profile that cannot load")
    _run(*pip, "install", "--find-links", wheels, "mnemon-runtime[standard]", env=env)
    _run(command, "init", cwd=folder, env=env, stdout=subprocess.DEVNULL)
    _run(command, "view", "--user", "ada", cwd=folder, env=env, stdout=subprocess.DEVNULL)
    print("[cli] then [standard]: mnemon init refused, then init and view worked", flush=True)


def main() -> None:
    """Build, install, discover, audit and test; exit 1 naming the first failure."""
    started = time.monotonic()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    with tempfile.TemporaryDirectory(prefix="mnemon-dist-check-") as scratch:
        work = Path(scratch)
        venv, wheels, consumer = work / "venv", work / "wheels", work / "consumer"
        python = venv / "bin" / "python"
        env["MNEMON_HOME"] = str(work / "home")
        # 1. a fresh environment, outside the repository
        _run(sys.executable, "-m", "venv", venv)
        pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
        _run(*pip, "install", *TEST_REQUIREMENTS, env=env)
        # 2. every distribution as a wheel (hatchling in the fresh environment builds them)
        _run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, *DISTRIBUTIONS)
        built = sorted(wheels.glob("*.whl"))
        if len(built) != len(DISTRIBUTIONS):
            _fail(f"{len(DISTRIBUTIONS)} distributions gave {len(built)} wheels")
        # 3. the wheels (no editable install, no source path), with the core's extras; the
        # `standard` extra must resolve to these wheels (what `mnemon init` writes)
        extras = "mnemon-runtime[cli,storage,standard]"
        _run(*pip, "install", "--find-links", wheels, *built, extras, env=env)
        consumer.mkdir()
        where = _run(
            python, "-c", "import mnemon; print(mnemon.__file__)",
            cwd=consumer, env=env, capture_output=True,
        ).stdout.strip()  # fmt: skip
        if Path(where).is_relative_to(ROOT):
            _fail(f"mnemon was imported from the source tree ({where})")
        # 4. discovery through entry points only: every plugin listed, none broken
        listed = json.loads(
            _run(
                venv / "bin" / "mnemon",
                "plugins",
                "--json",
                cwd=consumer,
                env=env,
                capture_output=True,
            ).stdout
        )
        plugins = {plugin["id"]: plugin for plugin in listed["plugins"]}
        expected: dict[str, str] = {}
        for folder in DISTRIBUTIONS[1:]:
            project = _project(folder)
            points = project.get("entry-points", {})
            assert isinstance(points, dict)
            for plugin_id in points.get("mnemon.plugins", {}):
                expected[plugin_id] = str(project["name"])
        for plugin_id, dist in sorted(expected.items()):
            found = plugins.get(plugin_id)
            if found is None:
                _fail(f"{dist}: plugin {plugin_id!r} was not discovered through its entry point")
            assert found is not None
            # first-party manifests say `bundled = true`: they rank as bundled
            if found["origin"] not in ("bundled", "entry-point") or found["status"] != "available":
                _fail(f"{dist}: plugin {plugin_id!r} is {found['status']} ({found['problem']})")
        print(f"discovered {len(expected)} plugins through their entry points", flush=True)
        # 5. each distribution imports only what it declares, and nothing private of the core
        names = [str(_project(folder)["name"]) for folder in DISTRIBUTIONS[1:]]
        problems = json.loads(
            _run(
                python,
                "-c",
                IMPORT_AUDIT,
                json.dumps(names),
                cwd=consumer,
                env=env,
                capture_output=True,
            ).stdout
        )
        if problems:
            _fail("; ".join(problems))
        # 6. activation by id in a profile, through the installed command
        profile = consumer / "mnemon.toml"
        profile.write_text(
            '[strategy]\nuse = "layered"\n\n[[entries]]\nid = "runtime"\nplugin = "runtime"\n'
            '\n[[entries]]\nid = "layered"\nplugin = "layered"\n',
            encoding="utf-8",
        )
        _run(venv / "bin" / "mnemon", "view", "--user", "ada", "--json", cwd=consumer, env=env,
             stdout=subprocess.DEVNULL)  # fmt: skip
        # 7. a newcomer's install in another fresh environment: `[cli]`, then `[standard]`
        check_standard_install(work, wheels, env)
        # 8. the plugins' own tests and the examples, against the installed wheels
        tests = consumer / "tests"
        for folder in DISTRIBUTIONS[1:]:
            if (folder / "tests").is_dir():
                shutil.copytree(folder / "tests", tests / folder.relative_to(ROOT) / "tests")
            if (folder / "examples").is_dir():  # plugins the tests serve (not packaged code)
                shutil.copytree(folder / "examples", tests / folder.relative_to(ROOT) / "examples")
        shutil.copy(ROOT / "examples" / "demo.py", tests / "examples" / "demo.py")
        shutil.copy(ROOT / "conftest.py", tests / "conftest.py")
        (tests / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
        _run(python, "-m", "pytest", tests, cwd=tests, env=env)
        _run(python, tests / "examples" / "demo.py", work / "demo", cwd=consumer, env=env,
             stdout=subprocess.DEVNULL)  # fmt: skip
    print(f"dist-check: passed in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
