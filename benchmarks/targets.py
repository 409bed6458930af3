"""The benchmarks' targets: a measured figure beside its limit, judged over one or more runs.

Every benchmark here takes `--quick`, `--check` and `--runs N`. With `--runs N` the whole
measurement runs N times (each run prints its own figures) and every target is judged by the
median of its N figures, printed with each run's figure beside it: on a shared machine one
run's ratios move by a fifth, so a single run can pass or fail by chance.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

__all__ = ["Check", "add_options", "repeat", "report"]


@dataclass(frozen=True)
class Check:
    """One target: a measured figure and the limit it must stay within (or reach)."""

    name: str
    value: float
    limit: float
    at_least: bool = False  # the figure must reach the limit rather than stay under it
    strict: bool = False  # `<` (or `>`) rather than `<=` (or `>=`)
    shown: str = "{:.2f}"  # how the figure is printed

    @property
    def passed(self) -> bool:
        """Whether the figure is within the limit."""
        if self.at_least:
            return self.value > self.limit if self.strict else self.value >= self.limit
        return self.value < self.limit if self.strict else self.value <= self.limit

    def figure(self, value: float | None = None) -> str:
        """The figure (or `value` in its place) as the report prints it."""
        return self.shown.format(self.value if value is None else value)


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add `--quick`, `--check` and `--runs` to a benchmark's arguments."""
    parser.add_argument("--quick", action="store_true", help="a short run, for smoke tests")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target fails")
    parser.add_argument(
        "--runs", type=_runs, default=1, help="full runs; targets are judged by their medians"
    )


def _runs(text: str) -> int:
    runs = int(text)
    if runs < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return runs


def repeat(runs: int, measure: Callable[[], Sequence[Check]]) -> list[Sequence[Check]]:
    """Call `measure` `runs` times, a blank line between runs' reports."""
    results = []
    for number in range(runs):
        if number:
            print()
        results.append(measure())
    return results


def verdict(passed: bool) -> str:
    """PASS or FAIL."""
    return "PASS" if passed else "FAIL"


def report(runs: Sequence[Sequence[Check]], title: str = "Targets") -> bool:
    """Print each target's median over `runs` (and every run's figure); True when all pass."""
    many = len(runs) > 1
    print()
    print(f"{title}, median of {len(runs)} runs (each run's figure)" if many else title)
    width = max(len(check.name) for check in runs[0])
    passed = True
    for index, check in enumerate(runs[0]):
        if any(checks[index].name != check.name for checks in runs):
            raise RuntimeError(f"the runs measured different targets (at {check.name!r})")
        values = [checks[index].value for checks in runs]
        median = replace(check, value=statistics.median(values))
        passed = passed and median.passed
        each = f"  ({', '.join(check.figure(value) for value in values)})" if many else ""
        print(f"  {check.name:<{width}}  {median.figure():>10}  {verdict(median.passed)}{each}")
    return passed
