"""Profiles: `mnemon.toml` loading, exact errors, relative paths, atomic mounting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mnemon import DefinitionError, InstallError, load_profile

NOTES_AND_FOCUS = """
data_dir = "state"
source_timeout = 2.5

[strategy]
use = "focus"

[[entries]]
id = "focus"
use = "mnemon_example_focus"
[entries.config]
source_keys = ["source:notes"]

[[entries]]
id = "notes"
use = "mnemon_example_notes"
[entries.config]
path = "{notes}"

[[entries]]
id = "disabled"
use = "no_such_package_anywhere"
enabled = false
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mnemon.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_profile_mounts_its_enabled_entries_in_one_change(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("From the profile.", encoding="utf-8")
    profile = load_profile(write(tmp_path, NOTES_AND_FOCUS.format(notes=notes)))
    assert profile.data_dir == tmp_path / "state"
    assert profile.settings.source_timeout == 2.5
    assert [(e.id, e.enabled) for e in profile.entries] == [
        ("focus", True),
        ("notes", True),
        ("disabled", False),
    ]
    async with profile.open_host() as host:
        report = host.inspect()
        async with host.turn() as turn:
            assert turn.view.fragments[0].text == "From the profile."
    assert report["registry_revision"] == 1
    assert report["entries"] == ["focus", "notes"]
    assert report["source_timeout"] == 2.5


def test_relative_data_dirs_resolve_against_the_profile_folder(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    profile = load_profile(
        write(
            folder,
            '[[entries]]\nid = "a"\nuse = "mnemon_example_notes"\n'
            '[entries.config]\ndata_dir = "../common"\n',
        )
    )
    assert profile.entry_config(profile.entries[0])["data_dir"] == str(tmp_path / "common")
    assert profile.data_dir == folder / ".mnemon"


async def test_the_profile_data_dir_is_the_hosts_default(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, 'data_dir = "/srv/memory"\n'))
    async with profile.open_host() as host:
        assert host.inspect()["data_dir"] == "/srv/memory"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("entries = [", "invalid TOML"),
        ('surprise = 1', r"surprise: unknown key \(the keys here are data_dir, source_timeout, max_input_bytes, max_concurrent_compositions, collector, switches, strategy, entries, observers\)"),
        ('source_timeout = 0', r"source_timeout: must be a number of seconds in \(0, 300\] \(line 1\)$"),
        ('source_timeout = 301', r"source_timeout: must be a number of seconds in \(0, 300\]"),
        ('source_timeout = "5"', r"source_timeout: must be a number of seconds"),
        ('max_input_bytes = 10', r"max_input_bytes: must be an integer from 1024 to 67108864"),
        ('max_concurrent_compositions = 0', r"max_concurrent_compositions: must be an integer of at least 1"),
        ('data_dir = ""', r"data_dir: must be a folder's path \(line 1\)$"),
        ('[strategy]\nfallback = "any"', r"strategy\.fallback: must be None or \"sole-strategy\" \(line 2\)$"),
        ('[strategy]\nuse = 7', r"strategy\.use: must be a Strategy type id or instance key \(line 2\)$"),
        ('[strategy]\nuse = ""', r"strategy\.use: must be a Strategy type id or instance key \(line 2\)$"),
        ('collector = "fast"', r"collector: Input should be 'python' or 'serving'"),
        ('[[entries]]\nid = "a"', r"entries\[0\]: an entry names its plugin with exactly one of `use` or `plugin`"),
        ('[[entries]]\nid = "a b"\nuse = "x"', r"entries\[0\]\.id: String should match pattern"),
        ('[[entries]]\nid = "a"\nuse = "not a module"', r"entries\[0\]\.use: String should match"),
        ('[[entries]]\nid = "a"\nuse = "x"\nenabled = "yes"', r"entries\[0\]\.enabled: Input should be a valid boolean"),
        ('[[entries]]\nid = "a"\nuse = "x"\n[[entries]]\nid = "a"\nuse = "y"', r"entries\[1\]\.id: duplicate entry id 'a'"),
        ('[[entries]]\nid = "a"\nuse = "x"\n[entries.config]\nwhen = 1979-05-27', r"entries\[0\]\.config: unsupported type date at \$\.when"),
    ],
    ids=["toml-syntax", "unknown-key", "zero-timeout", "long-timeout", "text-timeout", "small-input",
         "no-compositions", "empty-data-dir", "bad-fallback", "bad-use", "empty-use", "bad-collector",
         "missing-use", "bad-id", "bad-use", "bad-enabled", "duplicate-id", "date-in-config"],
)  # fmt: skip
def test_invalid_profiles_name_the_exact_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as caught:
        load_profile(write(tmp_path, text))
    assert "mnemon.toml" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('data_dri = "d"', r"^mnemon\.toml\.data_dri: unknown key; did you mean 'data_dir'\? \(line 1\)$"),
        ('data_dir = "d"\n\n[strategy]\nuses = "layered"', r"^mnemon\.toml\.strategy\.uses: unknown key; did you mean 'use'\? \(line 4\)$"),
        ('[[entries]]\nid = "a"\nuse = "x"\n\n[[entries]]\nid = "b"\nuse = "y"\nenabeld = false', r"^mnemon\.toml\.entries\[1\]\.enabeld: unknown key; did you mean 'enabled'\? \(line 8\)$"),
        ('# a comment\nsource_timeout = -1', r"source_timeout: must be a number of seconds in \(0, 300\] \(line 2\)$"),
        ('[[entries]]\nid = "a"\nuse = "x"\n[entries.config]\nenabled = 1\n[[entries]]\nid = "b"\nuse = "y"\nenabled = "no"', r"entries\[1\]\.enabled: Input should be a valid boolean \(line 9\)$"),
    ],
    ids=["top-level-typo", "strategy-typo", "entry-typo", "line-after-comment", "second-entry"],
)  # fmt: skip
def test_a_misspelt_key_gets_a_suggestion_and_every_error_its_line(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(DefinitionError, match=message):
        load_profile(write(tmp_path, text))


async def test_an_unknown_plugin_lists_the_installed_ones(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, '[[entries]]\nid = "r"\nuse = "mnemon_source_runtme"\n'))
    with pytest.raises(DefinitionError) as caught:
        async with profile.open_host():
            pass
    message = str(caught.value)
    assert "did you mean 'mnemon_source_runtime'?" in message
    assert "installed plugins: " in message
    assert "mnemon_strategy_layered" in message


def test_the_profile_is_found_in_a_parent_folder_like_git(tmp_path: Path) -> None:
    from mnemon._profile import find_profile

    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_profile(deep) is None or tmp_path not in find_profile(deep).parents
    write(tmp_path, 'data_dir = "d"\n')
    assert find_profile(deep) == tmp_path / "mnemon.toml"
    write(tmp_path / "a", 'data_dir = "d"\n')
    assert find_profile(deep) == tmp_path / "a" / "mnemon.toml"  # the nearest wins


def test_a_missing_profile_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="mnemon init"):
        load_profile(tmp_path / "absent.toml")


async def test_an_unimportable_plugin_is_named_and_nothing_is_mounted(tmp_path: Path) -> None:
    profile = load_profile(
        write(tmp_path, '[[entries]]\nid = "ghost"\nuse = "no_such_package_anywhere:plugin"\n')
    )
    with pytest.raises(
        DefinitionError, match=r"entry 'ghost' use: cannot import 'no_such_package_anywhere:plugin'"
    ):
        async with profile.open_host():
            pass
    not_plugin = load_profile(write(tmp_path, '[[entries]]\nid = "json"\nuse = "json"\n'))
    with pytest.raises(DefinitionError, match="is not a plugin"):
        async with not_plugin.open_host():
            pass


async def test_a_bad_entry_configuration_fails_the_whole_profile(tmp_path: Path) -> None:
    profile = load_profile(
        write(
            tmp_path,
            '[[entries]]\nid = "notes"\nuse = "mnemon_example_notes"\n'
            '[entries.config]\npath = "notes.md"\ncolour = "red"\n',
        )
    )
    with pytest.raises(InstallError, match=r"notes configuration\.colour: unknown key"):
        async with profile.open_host():
            pass


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('data_dir = "~no_such_user_tok_SECRET/data"', r"^mnemon\.toml: data_dir: cannot expand"),
        ('data_dir = "tok_SECRET\\u0000"', r"^mnemon\.toml: data_dir: a path cannot contain a NUL"),
        ('[[entries]]\nid = "a"\nuse = "x"\n[entries.config]\ndata_dir = "~no_such_user_tok_SECRET"',
         r"^mnemon\.toml: entries\[0\]\.config\.data_dir: cannot expand"),
        ("surprise = 1", r"^mnemon\.toml\.surprise: unknown key"),
    ],
    ids=["home-of-no-user", "nul", "entry-data-dir", "other-errors"],
)  # fmt: skip
def test_path_errors_name_the_key_never_the_path(tmp_path: Path, text: str, message: str) -> None:
    folder = tmp_path / "tok_SECRET_folder"
    folder.mkdir()
    with pytest.raises(DefinitionError, match=message) as caught:
        load_profile(write(folder, text))
    assert "tok_SECRET" not in str(caught.value)


def test_a_folder_given_as_the_profile_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "mnemon.toml"
    folder.mkdir()
    with pytest.raises(DefinitionError, match=r"^mnemon\.toml: is a folder, not a profile file"):
        load_profile(folder)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "text",
    [
        f"surprise = {_nested(3_000)}\n",
        f'[[entries]]\nid = "a"\nuse = "x"\n[entries.config]\ndeep = {_nested(3_000)}\n',
        "surprise = " + "{ a = " * 3_000 + "1" + " }" * 3_000 + "\n",
    ],
    ids=["arrays", "arrays-in-an-entry", "inline-tables"],
)
def test_a_profile_nested_too_deeply_is_a_profile_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        load_profile(write(tmp_path, text))
    message = str(caught.value)
    # the file and the rule, never the content
    assert re.fullmatch(r"mnemon\.toml: .*nest.* at most 48 levels.*", message), message
    assert "[[" not in message
    assert "{" not in message


async def test_strategy_selects_among_mounted_strategies_and_mounts_none(tmp_path: Path) -> None:
    profile = load_profile(
        write(
            tmp_path,
            '[strategy]\nuse = "layered"\n\n[[entries]]\nid = "runtime"\nplugin = "runtime"\n',
        )
    )
    assert profile.settings.strategy_type_id == "layered"
    async with profile.open_host() as host:
        report = host.inspect()
    assert report["entries"] == ["runtime"]
    assert report["state"] != "serving"
    assert [item["code"] for item in report["diagnostics"]] == ["missing-strategy"]
