"""Recall by words, by meaning, or both: the `mode` and `meaning_weight` inputs of `recall`.

The toy embedder of `test_semantic_recall` knows which words mean the same (tea and chai, cat
and feline), so what each mode finds is known exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from spaces_kit import ADA, open_spaces, recall, remember, scope_turn, texts
from test_semantic_recall import MEMORIES, open_with_meaning

from mnemon import RouteError

CHAI = "Ada's first cup every morning is chai."
# says "tea" three times, but means a cat: words find it first, meaning finds the chai first
TIN = "The cat knocked the tea tin over; cat, cat, tea tin, tea."


async def _recalled(tmp_path: Path, query: str, **fields: object) -> list[str]:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in [*MEMORIES, TIN]:
            await remember(turn, text)
        found = await recall(turn, query, limit=2, **fields)
        await turn.release()
    return texts(found)


async def test_mode_words_searches_keywords_alone_and_says_so(tmp_path: Path) -> None:
    runner, runtime = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        queries = runtime.queries
        found = await recall(turn, "What does she drink? tea", limit=2, mode="words")
        report = await recall(turn, "report", limit=2, mode="words")
        await turn.release()
    # the chai means tea, but shares no word with the question: words alone do not find it
    assert CHAI not in texts(found)
    assert runtime.queries == queries  # no query was embedded
    assert texts(report) == ["The quarterly report is due on Friday."]
    # only what was searched is named: no meaning rank, not even a null one
    assert report.items[0].provenance["explain"] == {"keywords": 1}


async def test_mode_meaning_searches_vectors_alone_and_says_so(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        found = await recall(turn, "tea", limit=2, mode="meaning")
        await turn.release()
    assert texts(found)[0] == CHAI
    why = found.items[0].provenance["explain"]
    assert set(why) == {"meaning", "similarity"}
    assert why["meaning"] == 1
    assert found.items[0].provenance["tier"] == "strong"


async def test_both_is_the_default_and_fuses(tmp_path: Path) -> None:
    assert await _recalled(tmp_path, "tea", mode="both") == await _recalled(
        tmp_path / "again", "tea"
    )


@pytest.mark.parametrize(
    ("weight", "first"),
    [(0.0, TIN), (1.0, CHAI)],
    ids=["words-weigh-all", "meaning-weighs-all"],
)
async def test_meaning_weight_sets_how_much_meaning_counts(
    tmp_path: Path, weight: float, first: str
) -> None:
    found = await _recalled(tmp_path, "tea", mode="both", meaning_weight=weight)
    assert found[0] == first


async def test_a_meaning_weight_with_another_mode_is_refused(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        with pytest.raises(RouteError) as refused:
            await recall(turn, "tea", mode="words", meaning_weight=0.2)
        await turn.release()
    assert refused.value.code == "invalid_payload"


async def test_mode_meaning_without_an_embedder_is_refused_never_served_by_words(
    tmp_path: Path,
) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "Ada drinks tea.")
        with pytest.raises(RouteError) as refused:
            await recall(turn, "tea", mode="meaning")
        # both falls back to words here, as recall always did without an embedder
        by_both = await recall(turn, "tea", mode="both")
        await turn.release()
    assert refused.value.code == "unsupported"
    assert not refused.value.retryable
    assert texts(by_both) == ["Ada drinks tea."]
    assert "explain" not in by_both.items[0].provenance


async def test_mode_meaning_with_vectors_off_is_refused(tmp_path: Path) -> None:
    runner, runtime = await open_with_meaning(tmp_path, vectors="off")
    async with runner:
        turn = await scope_turn(runner, ADA)
        with pytest.raises(RouteError) as refused:
            await recall(turn, "tea", mode="meaning")
        await turn.release()
    assert refused.value.code == "unsupported"
    assert runtime.queries == 0


async def test_mode_meaning_fails_with_the_embedders_code_when_it_cannot_encode(
    tmp_path: Path,
) -> None:
    runner, runtime = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, CHAI)
        runtime.down = True
        with pytest.raises(RouteError) as failed:
            await recall(turn, "tea", mode="meaning")
        # beside keywords, the same failure costs only meaning
        by_both = await recall(turn, "chai", mode="both")
        await turn.release()
    assert failed.value.code == "unavailable"
    assert texts(by_both) == [CHAI]
