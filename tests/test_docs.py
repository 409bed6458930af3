"""The documentation lives in the repository: links resolve and nothing points outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# written on other branches of the same change; once they are merged they must resolve too
WRITTEN_ELSEWHERE: set[str] = set()


def _text_files() -> list[Path]:
    skipped = {".venv", ".git", ".mnemon-demo", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    found = []
    for suffix in ("*.py", "*.md", "*.toml"):
        for path in ROOT.rglob(suffix):
            if not skipped.intersection(path.relative_to(ROOT).parts):
                found.append(path)
    return found


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_documentation_pages_exist() -> None:
    for name in ("architecture.md", "authoring.md"):
        assert (ROOT / "docs" / name).is_file(), f"docs/{name} is missing"


@pytest.mark.parametrize("document", _documents(), ids=lambda path: path.name)
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in LINK.findall(document.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        resolved = (document.parent / target).resolve()
        relative = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else None
        assert relative is not None, f"{document.name} links outside the repository: {target}"
        if relative not in WRITTEN_ELSEWHERE and not resolved.exists():
            broken.append(target)
    assert not broken, f"{document.name} has broken links: {broken}"


def test_the_readme_links_every_plugin_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {
        (ROOT / target).resolve() for target in LINK.findall(readme) if target.endswith(".md")
    }
    plugins = sorted(
        path.parent / "README.md"
        for folder in ("sources", "strategies", "examples", "testing")
        for path in (ROOT / folder).glob("**/pyproject.toml")
        if ".venv" not in path.parts
    )
    missing = [str(p.relative_to(ROOT)) for p in plugins if p.resolve() not in linked]
    assert plugins
    assert not missing, f"README.md does not link: {missing}"


def test_nothing_refers_to_notes_outside_the_repository() -> None:
    # the team's design notes are not shipped: a clone must be readable on its own
    pattern = re.compile(r"DESIGN\s*§|DESIGN\.md|STYLE\.md|\.\./shared/")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _text_files()
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, f"references to files outside the repository: {offenders}"


def _python_block(document: Path, containing: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(encoding="utf-8"), re.DOTALL)
    [block] = [block for block in blocks if containing in block]
    return block


async def test_the_authoring_guide_strategy_and_extension_compose_a_view() -> None:
    from mnemon.sdk import install_memory
    from mnemon_testing import MemoryCompositionRunner, StubSource

    guide = ROOT / "docs" / "authoring.md"
    strategy: dict[str, object] = {}
    exec(_python_block(guide, "define_memory_strategy(MANIFEST, compose)"), strategy)
    extension: dict[str, object] = {}
    exec(_python_block(guide, "define_view_extension("), extension)

    class StrategyPlugin:
        def apply(self, ctx: object) -> None:
            install_memory(ctx, strategies=[strategy["STRATEGY"]])  # type: ignore[arg-type]

    class ExtensionPlugin:
        apply = staticmethod(extension["apply"])

    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("notes", text="n" * 5_000), instance_id="notes")
        await runner.mount(StubSource("docs", routes=["search"]), instance_id="docs")
        await runner.mount(StrategyPlugin(), instance_id="even")
        await runner.mount(ExtensionPlugin(), instance_id="short")
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        view = turn.view
        await turn.release()
    assert view.strategy_type_id == "even-split"
    assert [route.id for route in view.routes] == ["source:docs/search"]
    assert view.diagnostics == ()
    assert [record.slot for record in view.extensions] == ["projection"]
    # the extension's cap of 2,000 characters, split evenly over the two Sources
    assert sorted(len(fragment.text) for fragment in view.fragments) == [11, 1_000]
