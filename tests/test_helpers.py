"""Helpers for plugin authors: safe truncation, honest receipts, blocking calls."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mnemon.sdk

# ------------------------------------------------------------------------- truncate_text

THUMBS_UP_TONED = "\U0001f44d\U0001f3fd"  # 👍🏽
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧
FRANCE = "\U0001f1eb\U0001f1f7"
GERMANY = "\U0001f1e9\U0001f1ea"
ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
KEYCAP_ONE = "1\ufe0f\u20e3"
E_ACUTE = "e\u0301"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("hello", 5, "hello", id="fits-exactly"),
        pytest.param("hello", 50, "hello", id="fits-with-room"),
        pytest.param("", 0, "", id="empty-text-zero-limit"),
        pytest.param("hello", 0, "", id="zero-limit"),
        pytest.param("hello", 3, "hel", id="plain-ascii"),
        pytest.param("ok" + THUMBS_UP_TONED, 3, "ok", id="skin-tone-modifier"),
        pytest.param("ok" + THUMBS_UP_TONED, 4, "ok" + THUMBS_UP_TONED, id="skin-tone-fits"),
        pytest.param("hi" + FAMILY, 3, "hi", id="zwj-family-after-first-person"),
        pytest.param("hi" + FAMILY, 4, "hi", id="zwj-family-after-joiner"),
        pytest.param("hi" + FAMILY, 6, "hi", id="zwj-family-before-last-person"),
        pytest.param("hi" + FAMILY + "!", 7, "hi" + FAMILY, id="zwj-family-whole"),
        pytest.param(FRANCE + GERMANY, 3, FRANCE, id="flags-mid-second-flag"),
        pytest.param(FRANCE + GERMANY, 2, FRANCE, id="flags-between-flags"),
        pytest.param("x" + FRANCE + GERMANY, 2, "x", id="flags-mid-first-flag"),
        pytest.param("x" + FRANCE + GERMANY, 4, "x" + FRANCE, id="flags-odd-offset"),
        pytest.param("x" + ENGLAND, 4, "x", id="emoji-tag-sequence"),
        pytest.param("a" + KEYCAP_ONE, 2, "a", id="keycap-before-selector"),
        pytest.param("a" + KEYCAP_ONE, 3, "a", id="keycap-before-enclosing-mark"),
        pytest.param("caf" + E_ACUTE, 4, "caf", id="combining-accent"),
        pytest.param("caf" + E_ACUTE + "s", 5, "caf" + E_ACUTE, id="combining-accent-whole"),
        pytest.param("line\r\nnext", 5, "line", id="crlf"),
        pytest.param("line\r\nnext", 6, "line\r\n", id="crlf-whole"),
        pytest.param("a\ud83d\ude00b", 2, "a", id="explicit-surrogate-pair"),
        # a grapheme that cannot fit is cut; a surrogate pair never is
        pytest.param(THUMBS_UP_TONED, 1, "\U0001f44d", id="lone-grapheme-longer-than-limit"),
        pytest.param("\ud83d\ude00", 1, "", id="lone-surrogate-pair-longer-than-limit"),
        pytest.param("a\u1112\u1161\u11ab", 3, "a", id="hangul-conjoining-jamo"),
    ],
)
def test_truncate_text_cuts_at_grapheme_boundary(text: str, limit: int, expected: str) -> None:
    assert mnemon.sdk.truncate_text(text, limit) == expected


def test_truncate_text_returns_the_same_text_when_it_fits() -> None:
    text = "fits" + FAMILY
    assert mnemon.sdk.truncate_text(text, len(text)) is text


@pytest.mark.parametrize("limit", [-1, -100])
def test_truncate_text_rejects_negative_limit(limit: int) -> None:
    with pytest.raises(ValueError, match="negative"):
        mnemon.sdk.truncate_text("abc", limit)


@given(text=st.text(), data=st.data())
def test_truncate_text_returns_a_bounded_prefix(text: str, data: st.DataObject) -> None:
    limit = data.draw(st.integers(min_value=0, max_value=len(text) + 2), label="limit")
    result = mnemon.sdk.truncate_text(text, limit)
    assert text.startswith(result)
    assert len(result) <= limit
    if len(text) <= limit:
        assert result == text


# whole graphemes; none of them joins with its neighbours, so their edges are the only boundaries
GRAPHEMES = [
    "a",
    "Z",
    " ",
    "\n",
    "\r\n",
    E_ACUTE,
    "o\u0308\u0301",
    THUMBS_UP_TONED,
    FAMILY,
    FRANCE,
    GERMANY,
    ENGLAND,
    KEYCAP_ONE,
    "\u00e9",
    "\U0001f600",
    "\ud83d\ude00",  # a surrogate pair spelled out in a Python str
]


@given(
    graphemes=st.lists(st.sampled_from(GRAPHEMES), max_size=12),
    data=st.data(),
)
def test_truncate_text_keeps_the_most_whole_graphemes_that_fit(
    graphemes: list[str], data: st.DataObject
) -> None:
    text = "".join(graphemes)
    limit = data.draw(st.integers(min_value=0, max_value=len(text) + 2), label="limit")
    result = mnemon.sdk.truncate_text(text, limit)
    boundaries = [0, *itertools.accumulate(len(grapheme) for grapheme in graphemes)]
    assert text.startswith(result)
    assert len(result) <= limit
    if graphemes and len(graphemes[0]) > limit:
        # nothing whole fits: a cut is allowed, but never between the halves of a surrogate pair
        assert not result or not "\ud800" <= result[-1] <= "\udbff"
    else:
        assert len(result) == max(b for b in boundaries if b <= limit)


# ------------------------------------------------------------------------- receipts


def _request(idempotency_key: str | None = "k1") -> mnemon.sdk.MutationRequest:
    return mnemon.sdk.MutationRequest(
        view=mnemon.ViewRef(id="view:x", scope=mnemon.Scope()),
        offer=mnemon.ActionOffer(
            id="source:a/replace",
            source_key="source:a",
            action_id="replace",
            description="d",
            capability="write",
            input_schema={"type": "object"},
        ),
        grant=None,
        input={},
        idempotency_key=idempotency_key,
    )


COMMITTED_AT = "2024-05-01T12:00:00+00:00"


def test_receipt_defaults_to_unknown_and_failed() -> None:
    receipt = mnemon.sdk.create_mutation_receipt(_request())
    assert isinstance(receipt, mnemon.MutationReceipt)
    assert receipt.completion == "unknown"
    assert receipt.status == "failed"
    assert receipt.committed_at is None


def test_receipt_is_bound_to_the_request() -> None:
    receipt = mnemon.sdk.create_mutation_receipt(
        _request(), completion="committed", committed_at=COMMITTED_AT, revision="r2"
    )
    assert receipt.view_id == "view:x"
    assert receipt.offer_id == "source:a/replace"
    assert receipt.source_key == "source:a"
    assert receipt.idempotency_key == "k1"
    assert receipt.revision == "r2"
    assert mnemon.sdk.create_mutation_receipt(_request(None)).idempotency_key is None


@pytest.mark.parametrize(
    ("completion", "committed_at", "status"),
    [
        pytest.param("accepted", None, "succeeded", id="accepted"),
        pytest.param("candidate", None, "succeeded", id="candidate"),
        pytest.param("committed", COMMITTED_AT, "succeeded", id="committed"),
        pytest.param("partial", None, "partial", id="partial"),
        pytest.param("failed", None, "failed", id="failed"),
        pytest.param("unknown", None, "failed", id="unknown"),
    ],
)
def test_receipt_status_defaults_to_what_completion_implies(
    completion: Any, committed_at: str | None, status: str
) -> None:
    receipt = mnemon.sdk.create_mutation_receipt(
        _request(), completion=completion, committed_at=committed_at
    )
    assert (receipt.completion, receipt.status) == (completion, status)


def test_committed_receipt_requires_committed_at() -> None:
    with pytest.raises(mnemon.DefinitionError, match=r"^receipt.*committed_at"):
        mnemon.sdk.create_mutation_receipt(_request(), completion="committed")


@pytest.mark.parametrize("completion", ["accepted", "candidate", "partial", "failed", "unknown"])
def test_only_committed_receipt_may_carry_committed_at(completion: Any) -> None:
    with pytest.raises(mnemon.DefinitionError, match="committed_at"):
        mnemon.sdk.create_mutation_receipt(
            _request(), completion=completion, committed_at=COMMITTED_AT
        )


@pytest.mark.parametrize(
    ("committed_at", "words"),
    [
        pytest.param("2024-05-01T12:00:00", "time zone", id="naive-timestamp"),
        pytest.param("2024-05-01", "time zone", id="date-only"),
        pytest.param("yesterday", "ISO 8601", id="not-a-timestamp"),
        pytest.param("", "ISO 8601", id="empty"),
    ],
)
def test_committed_at_must_be_iso_8601_with_time_zone(committed_at: str, words: str) -> None:
    with pytest.raises(mnemon.DefinitionError, match=rf"^receipt\.committed_at: .*{words}"):
        mnemon.sdk.create_mutation_receipt(
            _request(), completion="committed", committed_at=committed_at
        )


@pytest.mark.parametrize(
    "committed_at",
    [
        pytest.param("2024-05-01T12:00:00Z", id="zulu"),
        pytest.param("2024-05-01T14:00:00+02:00", id="offset"),
        pytest.param("2024-05-01T12:00:00.123456+00:00", id="microseconds"),
    ],
)
def test_committed_at_accepts_zoned_timestamps(committed_at: str) -> None:
    receipt = mnemon.sdk.create_mutation_receipt(
        _request(), completion="committed", committed_at=committed_at
    )
    assert receipt.committed_at == committed_at


@pytest.mark.parametrize(
    ("completion", "status"),
    [
        pytest.param("failed", "succeeded", id="failed-but-succeeded"),
        pytest.param("failed", "partial", id="failed-but-partial"),
        pytest.param("unknown", "succeeded", id="unknown-but-succeeded"),
        pytest.param("partial", "succeeded", id="partial-but-succeeded"),
    ],
)
def test_dishonest_receipt_is_rejected(completion: Any, status: Any) -> None:
    with pytest.raises(mnemon.DefinitionError, match=r"^receipt"):
        mnemon.sdk.create_mutation_receipt(_request(), completion=completion, status=status)


def test_committed_receipt_with_failed_status_is_rejected() -> None:
    with pytest.raises(mnemon.DefinitionError, match="succeeded"):
        mnemon.sdk.create_mutation_receipt(
            _request(), completion="committed", status="failed", committed_at=COMMITTED_AT
        )


def test_unknown_completion_is_a_definition_error() -> None:
    with pytest.raises(mnemon.DefinitionError, match=r"^receipt\.completion"):
        mnemon.sdk.create_mutation_receipt(_request(), completion="done")  # type: ignore[arg-type]


def test_receipt_detail_is_a_frozen_private_copy() -> None:
    detail: dict[str, Any] = {"ids": ["n1"]}
    receipt = mnemon.sdk.create_mutation_receipt(_request(), completion="accepted", detail=detail)
    detail["ids"].append("n2")
    assert receipt.detail == {"ids": ("n1",)}
    with pytest.raises(TypeError, match="frozen"):
        receipt.detail["ids"] = ()  # type: ignore[index]
    with pytest.raises(mnemon.DefinitionError, match=r"^receipt\.detail: .*\$\.n"):
        mnemon.sdk.create_mutation_receipt(_request(), detail={"n": float("nan")})


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"completion": "committed", "status": "succeeded"}, id="committed-without-at"),
        pytest.param(
            {"completion": "accepted", "status": "succeeded", "committed_at": COMMITTED_AT},
            id="accepted-with-at",
        ),
        pytest.param({"completion": "unknown", "status": "succeeded"}, id="unknown-succeeded"),
        pytest.param({"completion": "failed", "status": "succeeded"}, id="failed-succeeded"),
        pytest.param(
            {"completion": "committed", "status": "succeeded", "committed_at": "noon"},
            id="committed-at-not-a-timestamp",
        ),
    ],
)
def test_receipt_model_rejects_dishonest_combination(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        mnemon.MutationReceipt(view_id="view:x", offer_id="o", source_key="source:a", **fields)


def test_receipt_model_is_frozen() -> None:
    receipt = mnemon.MutationReceipt(
        view_id="view:x", offer_id="o", source_key="source:a", completion="unknown", status="failed"
    )
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        receipt.status = "succeeded"  # type: ignore[misc]


# ------------------------------------------------------------------------- run_blocking


async def test_run_blocking_runs_in_a_worker_thread() -> None:
    def where(offset: int) -> tuple[int, int]:
        return threading.get_ident(), offset + 1

    thread, value = await mnemon.sdk.run_blocking(where, 41)
    assert value == 42
    assert thread != threading.get_ident()


@given(
    st.integers(min_value=0, max_value=10_000_000),
    st.lists(st.integers(min_value=0, max_value=1_000), min_size=1, max_size=40).filter(any),
)
def test_allocate_characters_sums_exactly_and_follows_the_weights(
    total: int, weights: list[int]
) -> None:
    shares = mnemon.sdk.allocate_characters(total, weights)
    assert sum(shares) == total
    whole = sum(weights)
    for share, weight in zip(shares, weights, strict=True):
        exact = total * weight / whole
        assert exact - 1 < share < exact + 1
        if weight == 0:
            assert share == 0


def test_allocate_characters_edges() -> None:
    assert mnemon.sdk.allocate_characters(10, []) == ()
    assert mnemon.sdk.allocate_characters(10, [90, 5, 5]) == (9, 1, 0)
    assert mnemon.sdk.allocate_characters(3, [1, 1, 1, 1]) == (1, 1, 1, 0)
    for bad in ((-1, [1]), (5, [0, 0]), (5, [1, -1])):
        with pytest.raises(ValueError, match="allocate_characters"):
            mnemon.sdk.allocate_characters(*bad)
