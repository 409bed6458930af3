"""A plugin's name and description in other languages: `locale/<language>.json` beside its
manifest, read by discovery without importing the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon import DefinitionError, discover_plugins
from tests.test_discovery import RAISES_ON_IMPORT, drop_in, manifest


def localized(tmp_path: Path, files: dict[str, str]) -> Path:
    project = tmp_path / "project"
    drop_in(
        project / ".mnemon" / "plugins",
        "hello",
        manifest("hello", target="hello:plugin"),
        files={"hello/__init__.py": RAISES_ON_IMPORT, **files},
    )
    return project


def meta(title: object, description: object = None) -> str:
    body: dict[str, object] = {"title": title}
    if description is not None:
        body["description"] = description
    return json.dumps({"meta": body, "pages": {"own": "strings"}}, ensure_ascii=False)


def test_titles_and_descriptions_in_english_and_chinese(tmp_path: Path) -> None:
    project = localized(
        tmp_path,
        {
            "locale/en.json": meta("Hello memory", "Greets the user."),
            "locale/zh.json": meta("问候记忆", "向用户问好。"),
        },
    )
    (plugin,) = list(discover_plugins(project_dir=project, entry_points=False))
    english, chinese = plugin.labels("en"), plugin.labels("zh")
    assert english is not None
    assert chinese is not None
    assert (english.title, english.description) == ("Hello memory", "Greets the user.")
    assert (chinese.language, chinese.title, chinese.description) == (
        "zh",
        "问候记忆",
        "向用户问好。",
    )
    # no file for a language: the caller falls back to the manifest's own words
    assert plugin.labels("fr") is None
    assert plugin.manifest is not None
    assert plugin.manifest.display_name == "Plugin hello"


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        json.dumps({"meta": {"title": 42}}),
        json.dumps({"meta": {"title": ""}}),
        json.dumps({"meta": {"title": "x" * 201}}),
        json.dumps({"title": "no meta table"}),
        json.dumps(["meta"]),
        "[" * 100_000,
        json.dumps({"meta": {"title": "big", "description": "y" * 70_000}}),
    ],
    ids=[
        "not-json",
        "title-not-text",
        "empty",
        "too-long",
        "no-meta",
        "not-object",
        "deep",
        "huge",
    ],
)
def test_a_broken_translation_falls_back_and_breaks_nothing(tmp_path: Path, body: str) -> None:
    project = localized(tmp_path, {"locale/en.json": body, "locale/zh.json": meta("好")})
    (plugin,) = list(discover_plugins(project_dir=project, entry_points=False))
    assert plugin.status == "available"
    assert plugin.labels("en") is None
    chinese = plugin.labels("zh")
    assert chinese is not None
    assert chinese.title == "好"
    assert chinese.description is None


@pytest.mark.parametrize("language", ["../../etc/passwd", "EN", "", "en/../zh", "e"])
def test_a_language_is_a_tag_never_a_path(tmp_path: Path, language: str) -> None:
    project = localized(tmp_path, {"locale/en.json": meta("Hello")})
    (plugin,) = list(discover_plugins(project_dir=project, entry_points=False))
    with pytest.raises(DefinitionError, match="not a language tag"):
        plugin.labels(language)


def test_first_party_plugins_ship_english_and_chinese_labels() -> None:
    plugins = {p.id: p for p in discover_plugins(entry_points=True)}
    for plugin_id in ("runtime", "documents", "spaces", "layered", "auto-capture"):
        english, chinese = plugins[plugin_id].labels("en"), plugins[plugin_id].labels("zh")
        assert english is not None, plugin_id
        assert chinese is not None, plugin_id
        assert english.title != chinese.title
