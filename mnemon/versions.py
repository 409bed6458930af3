"""Versions and version ranges, as plugin manifests state them: SemVer 2.0.0 and its ranges.

A range is whitespace-separated comparators that must all hold, each an optional operator
(`>=`, `>`, `<=`, `<`, `=`; none means `=`) glued to a `MAJOR.MINOR.PATCH` release version.
`parse_version` and `parse_range` raise `RangeError` (a `ValueError`) naming what is wrong.
"""

from __future__ import annotations

from ._versions import RangeError, Version, VersionRange, parse_range, parse_version

__all__ = ["RangeError", "Version", "VersionRange", "parse_range", "parse_version"]

for _export in (RangeError, Version, VersionRange, parse_range, parse_version):
    _export.__module__ = __name__
del _export
