"""Versions and version ranges: SemVer 2.0.0 and the range grammar plugins declare.

Plugin manifests (`mnemon-plugin.toml`, remote `mnemon-source.yaml`, Quivr manifests) state
which core or protocol versions they work with in this grammar.

A range is whitespace-separated comparators that must all hold; each is an optional operator
(`>=`, `>`, `<=`, `<`, `=`; none means `=`) glued to a `MAJOR.MINOR.PATCH` release version.
Caret, tilde, `||`, partial versions, leading zeros and pre-release bounds are not part of the
grammar. A range no release version can satisfy is invalid too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from ._errors import MnemonError

__all__ = ["RangeError", "Version", "VersionRange", "parse_range", "parse_version"]

_NUMBER = r"(?:0|[1-9][0-9]*)"
_IDENTIFIER = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_VERSION = re.compile(
    rf"^({_NUMBER})\.({_NUMBER})\.({_NUMBER})"
    rf"(?:-({_IDENTIFIER}(?:\.{_IDENTIFIER})*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_COMPARATOR = re.compile(rf"^(>=|<=|>|<|=)?({_NUMBER}\.{_NUMBER}\.{_NUMBER})$")


class RangeError(MnemonError, ValueError):
    """A version or range that is malformed or unsatisfiable; the message says which."""


@total_ordering
@dataclass(frozen=True)
class Version:
    """A SemVer 2.0.0 version; ordering is SemVer precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    def _key(self) -> tuple[object, ...]:
        # a release sorts after its pre-releases; numeric identifiers sort before others
        parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, not self.prerelease, parts)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def next_patch(self) -> Version:
        """The smallest release version above this one."""
        if self.prerelease:
            return Version(self.major, self.minor, self.patch)
        return Version(self.major, self.minor, self.patch + 1)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{'.'.join(self.prerelease)}" if self.prerelease else text


def parse_version(text: str) -> Version:
    """Parse a SemVer 2.0.0 version.

    Raises:
        RangeError: when `text` is not a SemVer version.
    """
    match = _VERSION.match(text) if isinstance(text, str) else None
    if match is None:
        raise RangeError("not a SemVer version")
    prerelease = tuple(match.group(4).split(".")) if match.group(4) else ()
    return Version(int(match.group(1)), int(match.group(2)), int(match.group(3)), prerelease)


_TESTS = {
    "=": lambda v, b: v == b,
    ">=": lambda v, b: v >= b,
    ">": lambda v, b: v > b,
    "<=": lambda v, b: v <= b,
    "<": lambda v, b: v < b,
}


@dataclass(frozen=True)
class VersionRange:
    """A parsed, satisfiable range: comparators that must all hold."""

    text: str
    comparators: tuple[tuple[str, Version], ...]

    def admits(self, version: Version | str) -> bool:
        """Whether `version` satisfies every comparator (SemVer precedence)."""
        if isinstance(version, str):
            version = parse_version(version)
        return all(_TESTS[op](version, bound) for op, bound in self.comparators)


def parse_range(text: str) -> VersionRange:
    """Parse a range in Quivr's v0 grammar and check that some release version satisfies it.

    Raises:
        RangeError: when `text` is malformed or unsatisfiable.
    """
    if not isinstance(text, str):
        raise RangeError("a range is a string")
    pieces = text.split()
    if not pieces:
        raise RangeError("a range holds at least one comparator")
    comparators: list[tuple[str, Version]] = []
    for piece in pieces:
        match = _COMPARATOR.match(piece)
        if match is None:
            raise RangeError(f"comparator {len(comparators) + 1} is outside the range grammar")
        comparators.append((match.group(1) or "=", parse_version(match.group(2))))
    parsed = VersionRange(text, tuple(comparators))
    # the smallest release satisfying all lower bounds is one of these; none fits → unsatisfiable
    candidates = {Version(0, 0, 0)}
    for _, bound in comparators:
        candidates.update((bound, bound.next_patch()))
    if not any(parsed.admits(candidate) for candidate in candidates):
        raise RangeError("no release version satisfies the range")
    return parsed
