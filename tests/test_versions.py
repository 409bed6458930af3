"""Version ranges: every normative case of the vendored ranges.json (see fixtures/quivr/NOTICE)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon import MnemonError
from mnemon.versions import RangeError, parse_range, parse_version

RANGES = json.loads((Path(__file__).parent / "fixtures" / "quivr" / "ranges.json").read_text())


@pytest.mark.parametrize(
    "case", RANGES["cases"], ids=lambda case: f"{case['range']} ? {case['version']}"
)
def test_every_normative_case_is_decided_as_written(case: dict[str, object]) -> None:
    version = parse_version(str(case["version"]))
    assert parse_range(str(case["range"])).admits(version) is case["satisfied"]


@pytest.mark.parametrize("text", RANGES["invalid"])
def test_every_normative_invalid_range_is_refused(text: str) -> None:
    with pytest.raises(RangeError):
        parse_range(text)


def test_a_range_error_is_a_mnemon_error_naming_the_rule() -> None:
    with pytest.raises(MnemonError, match="outside the range grammar"):
        parse_range("^1.2.3")
    with pytest.raises(RangeError, match="no release version satisfies"):
        parse_range(">=2.0.0 <1.0.0")
    with pytest.raises(RangeError, match="not a SemVer version"):
        parse_version("1.2")
