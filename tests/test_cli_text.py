"""`visible_text`: every class of character that can act on a terminal is escaped."""

from __future__ import annotations

import json

import pytest

from mnemon import visible_json, visible_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b]52;c;ZXZpbA==\x07b", "a\\x1b]52;c;ZXZpbA==\\x07b"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("\x1b[2J\x1b[8m", "\\x1b[2J\\x1b[8m"),
        ("ok\rfake", "ok\\rfake"),
        ("\x00\x08\x0b\x0c\x1f", "\\x00\\x08\\x0b\\x0c\\x1f"),
        ("del\x7f", "del\\x7f"),
        ("c1\x80\x85\x9b\x9d\x9f", "c1\\x80\\x85\\x9b\\x9d\\x9f"),
        ("\u061c\u200e\u200f", "\\u061c\\u200e\\u200f"),
        ("\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("zero\u200bwidth\ufeff\u00ad", "zero\\u200bwidth\\ufeff\\xad"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("bad byte \udcff", "bad byte \\udcff"),
    ],
    ids=["osc-52", "osc-0", "csi", "cr", "c0", "del", "c1", "bidi-marks", "bidi-embedding",
         "bidi-isolates", "separators", "zero-width", "tag-character", "lone-surrogate"],
)  # fmt: skip
def test_each_risky_class_is_shown_as_an_escape(raw: str, shown: str) -> None:
    assert visible_text(raw) == shown


def test_text_layout_and_scripts_are_kept() -> None:
    text = "Ada\tprefers tea.\n\u05e9\u05dc\u05d5\u05dd, Привет, 東京, 👨‍👩‍👧, می‌خواهم, back\\slash, non\u00a0breaking"
    assert visible_text(text) == text


def test_one_line_fields_escape_newlines_too() -> None:
    assert visible_text("a\nb\tc", keep_newlines=False) == "a\\nb\tc"


def test_json_keeps_its_value_and_loses_the_raw_characters() -> None:
    value = {"text": "x\x1b]52;c;e\x07\x7f\x85\u202e\u2028\U000e0041 \u05e9\u05dc\u05d5\u05dd\n"}
    document = json.dumps(value, indent=2, ensure_ascii=False)
    shown = visible_json(document)
    assert json.loads(shown) == value
    assert all(c not in shown for c in "\x1b\x07\x7f\x85\u202e\u2028\U000e0041")
    assert "\u05e9\u05dc\u05d5\u05dd" in shown  # Hebrew stays as it is
