"""Plugin discovery from the user's side: `mnemon plugins` and profiles naming plugin ids.

Plugins are dropped into `$MNEMON_HOME/plugins/` and `./.mnemon/plugins/`, or installed as a
distribution (a dist-info folder on `PYTHONPATH`), exactly as a user would provide them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mnemon
from mnemon import DefinitionError, InstallError, discover_plugins, load_profile

MNEMON = str(Path(sys.executable).parent / "mnemon")
SECRET = "sk-live-DISCOVERY-SECRET"
FIRST_PARTY = {
    "auto-capture", "documents", "focus", "general", "layered", "light-context", "notes",
    "quivr-ranking", "runtime", "scoped", "spaces",
}  # fmt: skip
# manifests saying `bundled = true`, and the examples, which say `bundled = false`
BUNDLED = {
    "auto-capture", "documents", "general", "layered", "light-context", "quivr-ranking",
    "runtime", "scoped", "spaces",
}  # fmt: skip
EXAMPLES = {"focus", "notes"}

# a drop-in Source: a package with a relative import, so the namespaced loading is exercised
SOURCE_PACKAGE = {
    "__init__.py": "from ._source import plugin as plugin\n",
    "_source.py": textwrap.dedent(
        """
        from mnemon import Fragment
        from mnemon.sdk import SourceFacts, ViewContribution, define_memory_source, install_memory

        class Greeting:
            def __init__(self, init):
                self.key = init.instance_key
            async def facts(self, request):
                return SourceFacts(instance_key=self.key, type_id="greeting", role="notes",
                                   availability="ready", revision="1", capabilities=["project"])
            async def project(self, request):
                text = "GREETING-MARKER from a drop-in plugin"[: request.max_characters]
                return ViewContribution(
                    fragments=[Fragment(source_key=self.key, mode=request.mode, text=text)])

        SOURCE = define_memory_source(
            {"type_id": "greeting", "package_name": "greeting", "role": "notes",
             "capabilities": ["project"], "consistency": "exact-snapshot"}, Greeting)

        class Plugin:
            def apply(self, ctx):
                install_memory(ctx, sources=[SOURCE])

        plugin = Plugin()
        """
    ),
}

# a drop-in Strategy whose type id is its plugin id, mounted by `plugin = "<id>"`
STRATEGY_MODULE = textwrap.dedent(
    """
    from mnemon.sdk import ViewSpec, define_memory_strategy, install_memory

    def compose(request, sources, contributions):
        share = request.budget.max_projection_characters // max(1, len(sources))
        return ViewSpec(strategy_type_id="even", explanation="every Source", sources=[
            {"source_key": s.key, "projection": {"mode": "eager", "max_characters": share}}
            for s in sources])

    STRATEGY = define_memory_strategy(
        {"type_id": "even", "package_name": "even", "max_sources": 8,
         "supported_source_roles": ["*"], "max_routes": 8, "max_actions": 8}, compose)

    class Plugin:
        def apply(self, ctx):
            install_memory(ctx, strategies=[STRATEGY])

    plugin = Plugin()
    """
)

MANIFEST = "mnemon-plugin.toml"
RAISES_ON_IMPORT = f'raise RuntimeError("{SECRET}: this module must not be imported")\n'


def manifest(
    plugin_id: str,
    *,
    entry: str | None = None,
    target: str = "greeting:plugin",
    mnemon_range: str = ">=0.1.0 <9.0.0",
    extra: str = "",
) -> str:
    return textwrap.dedent(
        f"""
        [plugin]
        id = "{plugin_id}"
        version = "1.2.3"
        display_name = "Plugin {plugin_id}"
        description = "A test plugin."
        mnemon = "{mnemon_range}"
        {extra}

        [[plugin.contributes.entries]]
        name = "{entry or plugin_id}"
        plugin = "{target}"
        config_schema = {{ type = "object", properties = {{ size = {{ type = "integer" }} }} }}
        """
    )


def drop_in(
    root: Path,
    folder: str,
    text: str,
    *,
    files: dict[str, str] | None = None,
    name: str = "mnemon-plugin.toml",
) -> Path:
    where = root / folder
    where.mkdir(parents=True, exist_ok=True)
    (where / name).write_text(text, encoding="utf-8")
    for relative, body in (files or {}).items():
        (where / relative).parent.mkdir(parents=True, exist_ok=True)
        (where / relative).write_text(body, encoding="utf-8")
    return where


def greeting(root: Path, folder: str, plugin_id: str, **options: Any) -> Path:
    files = {f"greeting/{name}": body for name, body in SOURCE_PACKAGE.items()}
    return drop_in(root, folder, manifest(plugin_id, **options), files=files)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    monkeypatch.setenv("MNEMON_HOME", str(folder))
    return folder


def plugins_json(cwd: Path, *arguments: str, **env: str) -> Any:
    result = subprocess.run(
        [MNEMON, "--no-color", "plugins", *arguments, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1", **env},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def by_id(listed: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for row in listed["plugins"]:
        found.setdefault(row["id"], []).append(row)
    return found


# ------------------------------------------------------------------ listing


def test_every_first_party_plugin_is_found_through_its_entry_point(tmp_path: Path) -> None:
    listed = plugins_json(tmp_path)
    rows = {row["id"]: row for row in listed["plugins"]}
    assert rows.keys() >= FIRST_PARTY
    for plugin_id in FIRST_PARTY:
        row = rows[plugin_id]
        assert (row["status"], row["problem"]) == ("available", None)
        assert row["version"] == "0.1.0"
        assert row["location"].endswith("/mnemon-plugin.toml")
        assert not row["location"].startswith("/")  # relative: an absolute path can carry a secret
    # released with the core, they rank as bundled; the examples are packaged as a third party
    assert {plugin_id: rows[plugin_id]["origin"] for plugin_id in BUNDLED | EXAMPLES} == {
        **dict.fromkeys(BUNDLED, "bundled"),
        **dict.fromkeys(EXAMPLES, "entry-point"),
    }
    ids = [row["id"] for row in listed["plugins"]]
    assert ids == sorted(ids)


def test_precedence_bundled_user_project_entry_point_and_shadowed_copies_are_listed(
    tmp_path: Path,
) -> None:
    home, project, site = tmp_path / "home", tmp_path / "project", tmp_path / "site"
    fake_distribution(site, module_body="", plugin_id="shared.id")  # installed, not bundled
    greeting(home / "plugins", "mine", "shared.id")
    greeting(project / ".mnemon" / "plugins", "theirs", "shared.id")
    greeting(project / ".mnemon" / "plugins", "local", "local.only")
    listed = by_id(plugins_json(project, MNEMON_HOME=str(home), PYTHONPATH=str(site)))
    shared = listed["shared.id"]
    assert [(r["origin"], r["status"]) for r in shared] == [
        ("user", "available"),
        ("project", "shadowed"),
        ("entry-point", "shadowed"),
    ]
    assert shared[0]["location"] == "$MNEMON_HOME/plugins/mine/mnemon-plugin.toml"
    assert shared[1]["location"] == ".mnemon/plugins/theirs/mnemon-plugin.toml"
    assert "shadowed by the user copy" in shared[2]["detail"]
    assert listed["local.only"][0]["origin"] == "project"


def test_a_drop_in_never_shadows_a_first_party_plugin_by_accident(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    greeting(home / "plugins", "mine", "runtime")
    # a drop-in's own `bundled = true` is not honoured: only an installed distribution's is
    greeting(project / ".mnemon" / "plugins", "theirs", "runtime", extra="bundled = true")
    listed = by_id(plugins_json(project, MNEMON_HOME=str(home)))
    runtime = listed["runtime"]
    assert [(r["origin"], r["status"]) for r in runtime] == [
        ("bundled", "available"),
        ("user", "shadowed"),
        ("project", "shadowed"),
    ]
    assert runtime[0]["location"].startswith("mnemon-source-runtime:")
    assert "shadowed by the bundled copy of 'runtime'" in runtime[1]["detail"]
    profile = project / "mnemon.toml"
    profile.write_text('[[entries]]\nid = "r"\nplugin = "runtime"\n', encoding="utf-8")
    plugin = load_profile(profile).entries[0].load_plugin(profile)
    assert plugin.__name__ == "mnemon_source_runtime"  # the first-party code, not the drop-in


def test_a_bundled_plugin_wins_over_every_other_place(tmp_path: Path) -> None:
    # bundled plugins ship inside the core wheel; the folder is a parameter for this unit test
    from mnemon._discovery import discover_plugins

    for root in ("bundled", "user", "project/.mnemon/plugins"):
        greeting(tmp_path / root, "copy", "runtime")
    found = [
        (plugin.origin, plugin.status)
        for plugin in discover_plugins(
            project_dir=tmp_path / "project",
            user_dir=tmp_path / "user",
            bundled_dir=tmp_path / "bundled",
        )
        if plugin.id == "runtime"
    ]
    assert found == [
        ("bundled", "available"),
        ("bundled", "shadowed"),  # the installed first-party copy: bundled too, found later
        ("user", "shadowed"),
        ("project", "shadowed"),
    ]


def test_a_user_drop_in_shadows_a_project_one_with_the_same_id(tmp_path: Path) -> None:
    # the same check with the manifest id differing from the folder name: the id is canonical
    greeting(tmp_path / "home" / "plugins", "folder-a", "same.id")
    greeting(tmp_path / ".mnemon" / "plugins", "folder-b", "same.id")
    [winner, shadowed] = by_id(plugins_json(tmp_path))["same.id"]
    assert (winner["origin"], shadowed["origin"], shadowed["status"]) == (
        "user",
        "project",
        "shadowed",
    )


BROKEN = [
    pytest.param("[plugin\nid = 1", "invalid-toml", id="invalid-toml"),
    pytest.param(manifest("Bad_Upper"), "invalid-manifest", id="id-not-lowercase"),
    pytest.param(manifest("x" * 65), "invalid-manifest", id="id-too-long"),
    pytest.param(manifest("a..b"), "invalid-manifest", id="id-empty-segment"),
    pytest.param(manifest("ok", mnemon_range="^0.1.0"), "invalid-manifest", id="caret-range"),
    pytest.param(manifest("ok", mnemon_range=">=9.0.0"), "incompatible-version", id="newer-core"),
    pytest.param(manifest("ok").replace("1.2.3", "1.2"), "invalid-manifest", id="not-semver"),
    pytest.param(manifest("ok", target="not a target"), "invalid-manifest", id="bad-target"),
    pytest.param(manifest("ok", extra="surprise = 1"), "invalid-manifest", id="unknown-key"),
    pytest.param(
        manifest("ok").replace('type = "object"', 'type = "no-such-type"'),
        "invalid-manifest",
        id="bad-config-schema",
    ),
    pytest.param(
        manifest("ok").replace('description = "A test plugin."\n', ""),
        "invalid-manifest",
        id="missing-key",
    ),
]


def test_broken_manifests_are_listed_with_their_codes_and_hide_no_other(tmp_path: Path) -> None:
    # one listing for every case: each broken manifest sits in its own folder beside a good one
    root = tmp_path / ".mnemon" / "plugins"
    for case in BROKEN:
        text, _ = case.values
        drop_in(root, case.id or "", str(text))
    greeting(root, "good", "good")
    listed = plugins_json(tmp_path)
    rows = {row["location"]: row for row in listed["plugins"]}
    for case in BROKEN:
        row = rows[f".mnemon/plugins/{case.id}/mnemon-plugin.toml"]
        assert (case.id, row["status"], row["problem"]) == (case.id, "broken", case.values[1])
        assert row["detail"]
    assert rows[".mnemon/plugins/good/mnemon-plugin.toml"]["status"] == "available"
    assert {row["id"] for row in listed["plugins"]} >= FIRST_PARTY


# hostile manifests: nesting that blew up the parser or the schema check of every command, and a
# file too big to parse
DEEP_SCHEMA = 'config_schema.type = "object"\nconfig_schema' + ".not" * 600 + " = {}"
HOSTILE = [
    pytest.param(
        "nested = " + "[" * 3000 + "]" * 3000 + "\n" + manifest("deep.toml"),
        MANIFEST,
        id="toml-nested-3000-deep",
    ),
    pytest.param(
        manifest("deep.schema").replace(
            'config_schema = { type = "object", properties = { size = { type = "integer" } } }',
            DEEP_SCHEMA,
        ),
        MANIFEST,
        id="config-schema-nested-600-deep",
    ),
    pytest.param(
        textwrap.dedent(
            """
            [plugin]
            id = "deep.raven"
            version = "2.0.0"
            display_name = "Deep Raven"
            raven = ">=1.0.0"
            """
        )
        + DEEP_SCHEMA
        + '\n\n[[plugin.contributes.memory_backends]]\nname = "deep"\nfactory = "deep:create"\n',
        "raven-plugin.toml",
        id="raven-config-schema-nested-600-deep",
    ),
    pytest.param(
        manifest("too.large") + "# " + "x" * 2_000_000 + "\n", MANIFEST, id="larger-than-1-mib"
    ),
]


def hostile_drop_ins(project: Path, home: Path) -> list[str]:
    """Every hostile manifest in the project's and the user's folder (inside the project)."""
    locations = []
    for root, prefix in ((project / ".mnemon" / "plugins", "project"), (home / "plugins", "user")):
        for case in HOSTILE:
            text, name = case.values
            # the folder's name is the id of a manifest that cannot be read
            folder = f"hostile-{prefix}-{case.id}"
            path = drop_in(root, folder, str(text), name=str(name)) / str(name)
            locations.append(path.relative_to(project).as_posix())
    return locations


def test_hostile_manifests_are_broken_invalid_manifests_and_hide_no_other(
    tmp_path: Path,
) -> None:
    locations = hostile_drop_ins(tmp_path, tmp_path / "home")
    greeting(tmp_path / ".mnemon" / "plugins", "good", "good")
    greeting(tmp_path / "home" / "plugins", "good-user", "good.user")
    listed = plugins_json(tmp_path)
    rows = {row["location"]: row for row in listed["plugins"]}
    for location in locations:
        row = rows[location]
        assert (location, row["status"], row["problem"]) == (location, "broken", "invalid-manifest")
        assert row["detail"]
        # the detail never quotes the file
        assert "[[" not in row["detail"]
        assert "xxxx" not in row["detail"]
    assert rows[".mnemon/plugins/good/mnemon-plugin.toml"]["status"] == "available"
    assert rows["home/plugins/good-user/mnemon-plugin.toml"]["status"] == "available"
    assert {row["id"] for row in listed["plugins"]} >= FIRST_PARTY
    shown = plugins_json(tmp_path, "show", "hostile-user-config-schema-nested-600-deep")
    assert (shown["status"], shown["problem"]) == ("broken", "invalid-manifest")


async def test_a_host_opens_with_hostile_manifests_beside_the_plugins_it_uses(
    tmp_path: Path, home: Path
) -> None:
    hostile_drop_ins(tmp_path, home)
    greeting(tmp_path / ".mnemon" / "plugins", "greeting-folder", "greet.me")
    drop_in(
        home / "plugins",
        "even",
        manifest("even", target="even_strategy:plugin"),
        files={"even_strategy.py": STRATEGY_MODULE},
    )
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        '[strategy]\nuse = "even"\n\n[[entries]]\nid = "hello"\nplugin = "greet.me"\n'
        '\n[[entries]]\nid = "even"\nplugin = "even"\n',
        encoding="utf-8",
    )
    async with (
        load_profile(profile).open_host() as host,
        host.turn(scope={"user_id": "ada"}) as turn,
    ):
        assert "GREETING-MARKER" in turn.wake()
        assert turn.view.strategy_type_id == "even"
    found = discover_plugins(project_dir=tmp_path)
    broken = [p for p in found if p.id.startswith("hostile-")]
    assert len(broken) == 2 * len(HOSTILE)
    assert {(p.status, p.problem) for p in broken} == {("broken", "invalid-manifest")}
    assert found.resolve("greet.me", where="test").status == "available"


def test_two_plugins_contributing_one_entry_name_are_an_error_naming_both(
    tmp_path: Path, home: Path
) -> None:
    greeting(tmp_path / ".mnemon" / "plugins", "one", "first", entry="shared")
    greeting(tmp_path / ".mnemon" / "plugins", "two", "second", entry="shared")
    rows = by_id(plugins_json(tmp_path, MNEMON_HOME=str(home)))
    for plugin_id in ("first", "second"):
        [row] = rows[plugin_id]
        assert (row["status"], row["problem"]) == ("broken", "duplicate-contribution")
        assert "'first' and 'second'" in row["detail"]
    profile = tmp_path / "mnemon.toml"
    profile.write_text('[[entries]]\nid = "g"\nplugin = "first"\n', encoding="utf-8")
    with pytest.raises(InstallError, match="'first' and 'second'"):
        load_profile(profile).entries[0].load_plugin(profile)


def test_a_raven_manifest_is_read_and_its_memory_backends_need_the_raven_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raven = textwrap.dedent(
        """
        [plugin]
        id = "raven.memory"
        version = "2.0.0"
        display_name = "Raven memory"
        raven = ">=1.0.0"
        bundled = false
        enabled_by_default = true
        config_schema = { type = "object" }

        [[plugin.contributes.memory_backends]]
        name = "raven-store"
        factory = "raven_store:create"

        [[plugin.contributes.tools]]
        name = "ignored-kind"
        """
    )
    drop_in(tmp_path / ".mnemon" / "plugins", "raven", raven, name="raven-plugin.toml")
    # hosted by mnemon-source-raven, which this environment may or may not have
    hosted = importlib.util.find_spec("mnemon_source_raven") is not None
    [row] = by_id(plugins_json(tmp_path))["raven.memory"]
    assert (row["status"], row["version"], row["problem"]) == (
        "available" if hosted else "unsupported",
        "2.0.0",
        None,
    )
    shown = plugins_json(tmp_path, "show", "raven.memory")
    assert shown["manifest"]["format"] == "raven"
    assert shown["manifest"]["requires"] == {"raven": ">=1.0.0"}
    [entry] = shown["manifest"]["entries"]
    assert (entry["name"], entry["plugin"], entry["supported"]) == (
        "raven-store",
        "raven_store:create",
        hosted,
    )
    # without the adapter, nothing can host them: found without importing anything
    monkeypatch.setitem(sys.modules, "mnemon_source_raven", None)
    found = discover_plugins(project_dir=tmp_path, entry_points=False).get("raven.memory")
    assert found is not None
    assert found.status == "unsupported"
    with pytest.raises(InstallError, match="needs mnemon-source-raven"):
        found.load()


# Raven's minimal manifest, as its contract writes one: no display name, no version range
RAVEN_MINIMAL = textwrap.dedent(
    """
    [plugin]
    id = "minimal-memory"
    version = "1.0"
    bundled = false

    [[plugin.contributes.memory_backends]]
    name = "minimal"
    factory = "fake_raven.backend:make_backend"
    """
)


def fake_raven_distribution(site: Path, *, record: bool = True, manifest: bool = True) -> None:
    """A Raven plugin as pip installs it: `[project.entry-points."raven.plugins"]`."""
    package = site / "fake_raven"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(RAISES_ON_IMPORT, encoding="utf-8")
    (package / "backend.py").write_text(RAISES_ON_IMPORT, encoding="utf-8")
    if manifest:
        (package / "raven-plugin.toml").write_text(RAVEN_MINIMAL, encoding="utf-8")
    info = site / "fake_raven-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-raven\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("[raven.plugins]\nminimal = fake_raven\n", "utf-8")
    listed = ["fake_raven/__init__.py", "fake_raven/backend.py"]
    listed += ["fake_raven/raven-plugin.toml"] if manifest else []
    # an editable install records no package files: the package's spec finds the manifest
    (info / "RECORD").write_text(
        "".join(f"{name},,\n" for name in listed) if record else "", encoding="utf-8"
    )


@pytest.mark.parametrize("record", [True, False], ids=["wheel", "editable"])
def test_a_raven_plugin_installed_in_ravens_group_is_found_without_importing_it(
    tmp_path: Path, record: bool
) -> None:
    site = tmp_path / "site"
    fake_raven_distribution(site, record=record)
    hosted = importlib.util.find_spec("mnemon_source_raven") is not None
    [row] = by_id(plugins_json(tmp_path, PYTHONPATH=str(site)))["minimal-memory"]
    assert (row["origin"], row["status"], row["version"], row["problem"]) == (
        "entry-point",
        "available" if hosted else "unsupported",
        "1.0",
        None,
    )
    assert row["location"] == "fake-raven:fake_raven/raven-plugin.toml"
    shown = plugins_json(tmp_path, "show", "minimal-memory", PYTHONPATH=str(site))
    manifest = shown["manifest"]
    assert (manifest["format"], manifest["display_name"], manifest["requires"]) == (
        "raven",
        "minimal-memory",
        {"raven": None},
    )
    assert [e["name"] for e in manifest["entries"]] == ["minimal"]


def test_a_raven_distribution_without_its_manifest_is_broken_not_hidden(tmp_path: Path) -> None:
    site = tmp_path / "site"
    fake_raven_distribution(site, manifest=False)
    [row] = by_id(plugins_json(tmp_path, PYTHONPATH=str(site)))["minimal"]
    assert (row["status"], row["problem"]) == ("broken", "invalid-manifest")
    assert "ships no raven-plugin.toml in package 'fake_raven'" in row["detail"]


def test_show_prints_the_manifest_schema_provides_and_requires(tmp_path: Path) -> None:
    greeting(tmp_path / ".mnemon" / "plugins", "g", "greet.me")
    shown = plugins_json(tmp_path, "show", "greet.me")
    assert shown["status"] == "available"
    manifest_shown = shown["manifest"]
    assert manifest_shown["requires"] == {"mnemon": ">=0.1.0 <9.0.0"}
    [entry] = manifest_shown["entries"]
    assert entry["plugin"] == "greeting:plugin"
    assert entry["config_schema"]["properties"] == {"size": {"type": "integer"}}
    text = subprocess.run(
        [MNEMON, "--no-color", "plugins", "show", "greet.me"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MNEMON_HOME": str(tmp_path / "home")},
    )
    assert text.returncode == 0, text.stderr
    assert "provides" in text.stdout
    assert '"size"' in text.stdout
    missing = subprocess.run(
        [MNEMON, "plugins", "show", "greet.mee", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MNEMON_HOME": str(tmp_path / "home")},
    )
    assert missing.returncode == 1
    error = json.loads(missing.stdout)["error"]
    assert error["code"] == "unknown-plugin"
    assert "did you mean 'greet.me'" in error["message"]


def test_version_is_the_distributions_and_the_command_prints_it(tmp_path: Path) -> None:
    from importlib.metadata import version

    assert mnemon.__version__ == version("mnemon-runtime")
    result = subprocess.run([MNEMON, "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert mnemon.__version__ in result.stdout


# ------------------------------------------------------------------ activation


async def test_a_project_drop_in_is_activated_by_its_id_in_the_profile(
    tmp_path: Path, home: Path
) -> None:
    greeting(tmp_path / ".mnemon" / "plugins", "greeting-folder", "greet.me")
    (tmp_path / ".mnemon" / "plugins" / "even").mkdir()
    drop_in(
        tmp_path / ".mnemon" / "plugins",
        "even",
        manifest("even", target="even_strategy:plugin"),
        files={"even_strategy.py": STRATEGY_MODULE},
    )
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        '[strategy]\nuse = "even"\n\n[[entries]]\nid = "hello"\nplugin = "greet.me"\n'
        '\n[[entries]]\nid = "even"\nplugin = "even"\n',
        encoding="utf-8",
    )
    path_before = list(sys.path)
    async with (
        load_profile(profile).open_host() as host,
        host.turn(scope={"user_id": "ada"}) as turn,
    ):
        assert "GREETING-MARKER" in turn.wake()
        assert turn.view.strategy_type_id == "even"
    assert sys.path == path_before  # drop-ins load without touching sys.path
    assert "greeting" not in sys.modules  # under a namespaced name, not the folder's
    assert any(name.endswith(".greeting._source") for name in sys.modules)
    statuses = {row["id"]: row["status"] for row in plugins_json(tmp_path)["plugins"]}
    assert statuses["greet.me"] == "active"
    assert statuses["even"] == "active"
    assert statuses["runtime"] == "available"


def test_an_unknown_id_lists_the_discovered_ones(tmp_path: Path, home: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text('[[entries]]\nid = "r"\nplugin = "runtme"\n', encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        load_profile(profile).entries[0].load_plugin(profile)
    message = str(caught.value)
    assert "did you mean 'runtime'?" in message
    assert "layered" in message


def test_an_entry_names_exactly_one_of_use_and_plugin(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        '[[entries]]\nid = "r"\nplugin = "runtime"\nuse = "mnemon_source_runtime"\n',
        encoding="utf-8",
    )
    with pytest.raises(DefinitionError, match="exactly one of `use` or `plugin`"):
        load_profile(profile)


async def test_a_plugin_that_raises_on_import_is_listed_and_imported_only_when_activated(
    tmp_path: Path, home: Path
) -> None:
    drop_in(
        tmp_path / ".mnemon" / "plugins",
        "explosive",
        manifest("explosive", target="explosive_module:plugin"),
        files={"explosive_module.py": RAISES_ON_IMPORT},
    )
    [row] = by_id(plugins_json(tmp_path))["explosive"]
    assert row["status"] == "available"
    profile = tmp_path / "mnemon.toml"
    profile.write_text(
        '[[entries]]\nid = "x"\nplugin = "explosive"\nenabled = false\n', encoding="utf-8"
    )
    async with load_profile(profile).open_host():
        pass  # a disabled entry is never imported
    [row] = by_id(plugins_json(tmp_path))["explosive"]
    assert row["status"] == "disabled"
    profile.write_text('[[entries]]\nid = "x"\nplugin = "explosive"\n', encoding="utf-8")
    with pytest.raises(InstallError) as caught:
        async with load_profile(profile).open_host():
            pass
    assert "'explosive'" in str(caught.value)
    assert "RuntimeError" in str(caught.value)
    assert SECRET not in str(caught.value)


def fake_distribution(
    site: Path,
    *,
    module_body: str,
    plugin_id: str = "installed.one",
    package: str = "fake_installed",
    entry_points: str | None = None,
    summary: str | None = None,
) -> None:
    """An installed distribution as a wheel leaves it: dist-info with RECORD and entry points.

    `entry_points` replaces the `entry_points.txt` text (default: the package in
    `mnemon.plugins`); `summary` is its metadata's one-line summary.
    """
    package_dir = site / package
    package_dir.mkdir(parents=True)
    (package_dir / "__init__.py").write_text(module_body, encoding="utf-8")
    (package_dir / "mnemon-plugin.toml").write_text(
        manifest(plugin_id, target=f"{package}:plugin"), encoding="utf-8"
    )
    name = package.replace("_", "-")
    info = site / f"{package}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n"
        + (f"Summary: {summary}\n" if summary else ""),
        encoding="utf-8",
    )
    (info / "entry_points.txt").write_text(
        entry_points
        if entry_points is not None
        else f"[mnemon.plugins]\ninstalled-one = {package}\n",
        encoding="utf-8",
    )
    (info / "RECORD").write_text(
        f"{package}/__init__.py,,\n{package}/mnemon-plugin.toml,,\n"
        f"{package}-1.2.3.dist-info/METADATA,,\n",
        encoding="utf-8",
    )


def test_an_installed_plugin_is_found_from_its_distribution_files_without_importing_it(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    fake_distribution(site, module_body=RAISES_ON_IMPORT)
    listed = by_id(plugins_json(tmp_path, PYTHONPATH=str(site)))
    [row] = listed["installed.one"]
    assert (row["origin"], row["status"]) == ("entry-point", "available")
    assert row["location"] == "fake-installed:fake_installed/mnemon-plugin.toml"
    assert listed.keys() >= FIRST_PARTY


def test_an_installed_distribution_without_a_manifest_is_broken_not_hidden(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    fake_distribution(site, module_body="")
    (site / "fake_installed" / "mnemon-plugin.toml").unlink()
    record = site / "fake_installed-1.2.3.dist-info" / "RECORD"
    record.write_text(
        record.read_text(encoding="utf-8").replace("fake_installed/mnemon-plugin.toml,,\n", ""),
        encoding="utf-8",
    )
    listed = by_id(plugins_json(tmp_path, PYTHONPATH=str(site)))
    [row] = listed["installed-one"]
    assert (row["status"], row["problem"]) == ("broken", "invalid-manifest")
    assert "ships no mnemon-plugin.toml" in row["detail"]


def test_a_strategy_id_named_only_by_a_disabled_entry_stays_disabled(tmp_path: Path) -> None:
    (tmp_path / "mnemon.toml").write_text(
        '[strategy]\nuse = "layered"\n\n[[entries]]\nid = "layered"\n'
        'use = "mnemon_strategy_layered"\nenabled = false\n\n'
        '[[entries]]\nid = "general"\nplugin = "general"\n',
        encoding="utf-8",
    )
    statuses = {row["id"]: row["status"] for row in plugins_json(tmp_path)["plugins"]}
    assert (statuses["layered"], statuses["general"], statuses["runtime"]) == (
        "disabled",
        "active",
        "available",
    )
