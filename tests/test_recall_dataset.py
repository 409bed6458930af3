"""The recall benchmark's dataset holds together: answers exist, in their question's scope."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import mnemon.sdk

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "agent-memories"
KINDS = {"paraphrase", "multi-hop", "temporal", "keyword", "negative"}


def _records(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def memories() -> list[dict[str, Any]]:
    return _records("memories.jsonl")


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    return _records("questions.jsonl")


def test_memories_are_unique_and_importable(memories: list[dict[str, Any]]) -> None:
    fields = {"id", "user", "text", "created_at"}
    assert all(set(memory) == fields for memory in memories)
    ids = [memory["id"] for memory in memories]
    assert len(set(ids)) == len(ids), "a memory id appears twice"
    texts = [memory["text"] for memory in memories]
    assert len(set(texts)) == len(texts), "a memory text appears twice"
    for memory in memories:
        # the id names its user, so an answer id says whose scope it belongs to
        assert re.fullmatch(rf"{memory['user']}-\d{{3}}", memory["id"]), memory["id"]
        mnemon.sdk.check_memory_text(memory["text"], max_characters=8_000)  # what `remember` takes
        assert datetime.fromisoformat(memory["created_at"]).tzinfo is not None, memory["id"]


def test_every_answer_is_a_memory_of_the_questions_user(
    memories: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    owner = {memory["id"]: memory["user"] for memory in memories}
    assert len({question["id"] for question in questions}) == len(questions)
    for question in questions:
        assert set(question) == {"id", "user", "question", "answers", "kind"}, question["id"]
        assert question["kind"] in KINDS, question["id"]
        answers = question["answers"]
        assert len(set(answers)) == len(answers), question["id"]
        if question["kind"] == "negative":
            assert answers == [], f"{question['id']}: a negative question has no answer"
        else:
            assert 1 <= len(answers) <= 3, question["id"]
        for answer in answers:
            assert answer in owner, f"{question['id']}: {answer} is not a memory"
            assert owner[answer] == question["user"], (
                f"{question['id']}: {answer} belongs to {owner[answer]}, not to {question['user']}"
            )


def test_the_readme_counts_match_the_files(
    memories: list[dict[str, Any]], questions: list[dict[str, Any]]
) -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    kinds = Counter(question["kind"] for question in questions)
    for kind in KINDS:
        assert re.search(rf"^\| `{kind}` \| {kinds[kind]} \|", readme, re.MULTILINE), kind
    assert f"{len(memories)} memories" in readme
    assert f"{len(questions)} questions" in readme
