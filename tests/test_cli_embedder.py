"""`mnemon init` mounts an installed embedder, and recall then finds memories by meaning.

The embedder is a drop-in plugin of the project (found by discovery, as a user's own would
be), with a toy vocabulary so what "meaning" finds is known exactly: tea, chai and drink
mean one thing; report, deadline and Friday another. A file `embedder-down` in the project
folder makes it fail, as an embedder that is down does.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.test_cli import mnemon

MANIFEST = """\
[plugin]
id = "aaa-toy"
version = "1.0.0"
display_name = "Toy embedder"
description = "Three concepts, for tests."
mnemon = ">=0.1.0 <9.0.0"

[[plugin.contributes.entries]]
name = "aaa-toy"
plugin = "toy_embedder"
installs = ["embedder"]
"""

CODE = textwrap.dedent(
    """
    import math
    from pathlib import Path

    from mnemon.sdk import QueryVector, Segment, SegmentAnswer, define_embedder, install_memory

    WORDS = {"tea": 0, "chai": 0, "drink": 0, "report": 1, "deadline": 1, "friday": 1}


    def vector(text):
        values = [0.0, 0.0, 0.1]
        for word in text.lower().replace(".", " ").replace("?", " ").split():
            if word in WORDS:
                values[WORDS[word]] += 1.0
        norm = math.sqrt(sum(value * value for value in values))
        return tuple(value / norm for value in values)


    class Toy:
        async def segment_and_embed(self, request):
            if Path("embedder-down").exists():  # in the project folder: the test's switch
                raise RuntimeError("the embedder is down")
            return SegmentAnswer(
                segments=tuple(
                    Segment(
                        part_key=part.key,
                        start=0,
                        end=len(part.text),
                        vectors={space: vector(part.text) for space in request.spaces},
                    )
                    for part in request.parts
                    if part.text
                )
            )

        async def embed_query(self, request):
            return QueryVector(vector=vector(request.text))


    DEFINITION = define_embedder(
        {
            "type_id": "toy",
            "package_name": "toy-embedder",
            "spaces": [
                {"id": "toy.words", "version": "1", "model": "toy", "dimensions": 3,
                 "metric": "cosine"}
            ],
        },
        lambda configuration: Toy(),
    )


    def apply(ctx):
        install_memory(ctx, embedders=[DEFINITION])
    """
)


def with_toy_embedder(folder: Path) -> Path:
    plugin = folder / ".mnemon" / "plugins" / "toy"
    plugin.mkdir(parents=True)
    (plugin / "mnemon-plugin.toml").write_text(MANIFEST, encoding="utf-8")
    (plugin / "toy_embedder.py").write_text(CODE, encoding="utf-8")
    return folder


def test_init_mounts_the_installed_embedder_and_recall_finds_meaning(tmp_path: Path) -> None:
    project = with_toy_embedder(tmp_path)
    wrote = mnemon(project, "init")
    assert wrote.returncode == 0, wrote.stderr
    assert "recall by meaning and words: the aaa-toy embedder is mounted" in wrote.stdout
    profile = (project / "mnemon.toml").read_text(encoding="utf-8")
    assert 'id = "embedder"\nplugin = "aaa-toy"' in profile
    for text in ("Ada's first cup every morning is chai.", "The quarterly report is due."):
        stored = mnemon(project, "remember", text, "--user", "ada", "--yes")
        assert stored.returncode == 0, stored.stderr
    found = json.loads(mnemon(project, "recall", "what to drink", "--user", "ada", "--json").stdout)
    assert "items" in found, found  # a failed read answers an error document instead
    # no word of the question is in the memory: its meaning found it
    assert found["items"][0]["text"] == "Ada's first cup every morning is chai."
    assert found["items"][0]["provenance"]["explain"]["keywords"] is None


def test_init_can_leave_recall_to_words(tmp_path: Path) -> None:
    project = with_toy_embedder(tmp_path)
    wrote = mnemon(project, "init", "--embedder", "none")
    assert wrote.returncode == 0, wrote.stderr
    assert "recall by words only, as --embedder none asked" in wrote.stdout
    assert 'id = "embedder"' not in (project / "mnemon.toml").read_text(encoding="utf-8")
    as_json = json.loads(mnemon(project, "init", "--force", "--embedder", "none", "--json").stdout)
    assert as_json["embedder"] is None


def test_init_refuses_an_embedder_it_cannot_mount(tmp_path: Path) -> None:
    project = with_toy_embedder(tmp_path)
    unknown = mnemon(project, "init", "--embedder", "nowhere")
    assert unknown.returncode == 2
    assert "--embedder: no plugin 'nowhere' was found" in unknown.stderr
    not_one = mnemon(project, "init", "--embedder", "layered")
    assert not_one.returncode == 2
    assert "'layered' is not an embedder that mounts without configuration" in not_one.stderr
    assert not (project / "mnemon.toml").exists()  # nothing written on a refusal


def _remember_while_down(project: Path, texts: tuple[str, ...]) -> None:
    (project / "embedder-down").touch()
    for text in texts:
        stored = mnemon(project, "remember", text, "--user", "ada", "--yes")
        assert stored.returncode == 0, stored.stderr  # durable, found by keyword meanwhile


def test_reindex_gives_vectors_to_what_was_written_while_the_embedder_was_down(
    tmp_path: Path,
) -> None:
    project = with_toy_embedder(tmp_path)
    assert mnemon(project, "init").returncode == 0
    _remember_while_down(project, ("Ada drinks chai.", "The report is due Friday.", "Tea."))

    still_down = mnemon(project, "reindex", "--user", "ada", "--yes", "--json")
    assert still_down.returncode == 1  # memories still wait: said, and the status says it
    answer = json.loads(still_down.stdout)
    assert answer["sources"] == [
        {"source": "source:spaces", "status": "waiting", "done": 0, "remaining": 3}
    ]
    said = mnemon(project, "reindex", "--user", "ada", "--yes")
    assert "source:spaces: 0 memory(ies) got their vectors; 3 still wait" in said.stdout

    (project / "embedder-down").unlink()
    back = mnemon(project, "reindex", "--user", "ada", "--yes")
    assert back.returncode == 0, back.stderr
    assert "source:spaces: 3 memory(ies) got their vectors; every memory in this scope" in (
        back.stdout
    )
    again = json.loads(mnemon(project, "reindex", "--user", "ada", "--yes", "--json").stdout)
    assert again["sources"][0] | {"done": None} == {
        "source": "source:spaces",
        "status": "complete",
        "done": None,
        "remaining": 0,
    }
    assert again["sources"][0]["done"] == 0
    # another scope's memories are another partition: nothing of ada's is counted there
    other = json.loads(mnemon(project, "reindex", "--user", "bob", "--yes", "--json").stdout)
    assert other["sources"][0]["remaining"] == 0


def test_reindex_asks_first_and_says_when_meaning_is_off(tmp_path: Path) -> None:
    project = with_toy_embedder(tmp_path)
    assert mnemon(project, "init", "--embedder", "none").returncode == 0
    declined = mnemon(project, "reindex", "--user", "ada", stdin="n\n")
    assert declined.returncode == 1
    assert "nothing was changed: you did not confirm" in declined.stderr
    off = mnemon(project, "reindex", "--user", "ada", "--yes")
    assert off.returncode == 0, off.stderr
    assert "source:spaces: nothing to reindex: recall by meaning is off there" in off.stdout
    unknown = mnemon(project, "reindex", "--source", "nowhere", "--user", "ada", "--yes")
    assert unknown.returncode == 1
    assert "source:nowhere is not mounted, or has no reindex operation" in unknown.stderr


def test_import_gives_the_imported_memories_their_vectors(tmp_path: Path) -> None:
    source = tmp_path / "from"
    source.mkdir()
    assert mnemon(source, "init", "--embedder", "none").returncode == 0
    for text in ("Ada drinks chai.", "The report is due Friday."):
        assert mnemon(source, "remember", text, "--user", "ada", "--yes").returncode == 0
    exported = source / "export.jsonl"
    assert mnemon(source, "export", "--out", str(exported), "--user", "ada").returncode == 0

    down = with_toy_embedder(tmp_path / "down")
    assert mnemon(down, "init").returncode == 0
    (down / "embedder-down").touch()
    waiting = mnemon(down, "import", str(exported), "--yes", "--json")
    assert waiting.returncode == 0, waiting.stderr
    summary = json.loads(waiting.stdout)
    assert summary["written"] == 2
    assert summary["vectors"] == [
        {"source": "source:spaces", "done": 0, "remaining": 2, "failed": None}
    ]
    told = mnemon(down, "import", str(exported), "--yes")
    assert "source:spaces: 2 memory(ies) still wait for their vectors" in told.stdout

    up = with_toy_embedder(tmp_path / "up")
    assert mnemon(up, "init").returncode == 0
    imported = json.loads(mnemon(up, "import", str(exported), "--yes", "--json").stdout)
    assert imported["vectors"][0]["remaining"] == 0
    found = json.loads(mnemon(up, "recall", "what to drink", "--user", "ada", "--json").stdout)
    assert found["items"][0]["text"] == "Ada drinks chai."
    assert found["items"][0]["provenance"]["explain"]["keywords"] is None
