"""The JSON boundary: validation, frozen private copies, canonical form and digests.

Everything that crosses between the core and a plugin passes through `freeze_json`, which
checks it, copies it and makes the copy immutable, so no party can change what another sees.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import Any, NoReturn, cast

import orjson

from ._errors import MnemonError

__all__ = [
    "MAX_JSON_DEPTH",
    "FrozenDict",
    "JsonValueError",
    "canonical_json",
    "configuration_digest",
    "content_hash",
    "digest",
    "freeze_json",
    "json_size_exceeds",
    "thaw_json",
]

MAX_JSON_DEPTH = 48
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1  # orjson encodes the signed and unsigned 64-bit range
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class JsonValueError(MnemonError, ValueError):
    """A value is not JSON-safe; the message names the path at fault."""

    def __init__(self, message: str, *, path: str, reason: str) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class FrozenDict(dict[str, Any]):
    """An immutable JSON object handed out by mnemon; `copy.deepcopy` gives a mutable copy."""

    # set only by `freeze_json`: such an object is already checked as a whole value
    __slots__ = ("_checked",)
    _checked: bool

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "JSON values handed over by mnemon are frozen; use copy.deepcopy() for a mutable copy"
        )

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        thawed: dict[str, Any] = thaw_json(self)
        return thawed

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


def _path_join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}"
    return f"{path}[{key[:64]!a}]"


def freeze_json(
    value: object,
    *,
    what: str = "value",
    error: type[MnemonError] = JsonValueError,
    path: str = "$",
) -> Any:
    """Check that `value` is JSON-safe and return a frozen private copy of it.

    Objects become `FrozenDict`, arrays become tuples; scalars are returned as they are.

    Raises:
        JsonValueError: (or `error`) naming `what` and the path of the first bad value.
    """
    if type(value) is FrozenDict and getattr(value, "_checked", False):
        return value  # immutable and checked as a whole: a subtree cannot be deeper or cyclic
    try:
        return _freeze(value, path, 0, set())
    except JsonValueError as exc:
        if error is JsonValueError:
            raise JsonValueError(f"{what}: {exc}", path=exc.path, reason=exc.reason) from None
        raise error(f"{what}: {exc}") from None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject(where: Any, reason: str) -> NoReturn:
    path = _path_of(where)
    raise JsonValueError(f"{reason} at {path}", path=path, reason=reason)


def _path_of(where: Any) -> str:
    """The path text of a `(parent, key)` chain, made only when a value is refused."""
    keys: list[str | int] = []
    while type(where) is tuple:
        where, key = where
        keys.append(key)
    path = cast(str, where)
    for key in reversed(keys):
        path = _path_join(path, key)
    return path


def _freeze(value: object, where: Any, depth: int, ancestors: set[int]) -> Any:
    # `where` is the root path or a (parent, key) pair: a tuple per value is cheap, and the
    # path text is only spelled out for a refusal
    kind = type(value)
    if kind is str:
        text = cast(str, value)
        if not text.isascii() and not _encodable(text):
            _reject(where, "string contains a lone surrogate")
        return text
    if kind is bool or value is None:
        return value
    if kind is int:
        if not _INT_MIN <= cast(int, value) <= _INT_MAX:
            _reject(where, "integer is outside the 64-bit range")
        return value
    if kind is float:
        if not math.isfinite(cast(float, value)):
            _reject(where, f"non-finite number {value!r}")
        return value
    if isinstance(value, (dict, list, tuple)):
        if depth >= MAX_JSON_DEPTH:
            _reject(where, f"nesting deeper than {MAX_JSON_DEPTH}")
        marker = id(value)
        if marker in ancestors:
            _reject(where, "cycle")
        ancestors.add(marker)
        try:
            if isinstance(value, dict):
                frozen: dict[str, Any] = {}
                for key, item in value.items():
                    if type(key) is not str:
                        _reject(where, f"non-string key {type(key).__name__}")
                    if not key.isascii() and not _encodable(key):
                        _reject(where, "key contains a lone surrogate")
                    if (
                        (type(item) is str and item.isascii())
                        or item is None
                        or type(item) is bool
                        or (type(item) is int and _INT_MIN <= item <= _INT_MAX)
                    ):  # most members, kept as the call would return them, without it
                        frozen[key] = item
                    elif type(item) is list and _ascii_strings(item) and depth + 1 < MAX_JSON_DEPTH:
                        frozen[key] = tuple(item)  # labels and the like: what the call makes
                    else:
                        frozen[key] = _freeze(item, (where, key), depth + 1, ancestors)
                checked = FrozenDict(frozen)
                checked._checked = True
                return checked
            return tuple(
                [
                    item
                    if type(item) is str and item.isascii()
                    else _freeze(item, (where, index), depth + 1, ancestors)
                    for index, item in enumerate(value)
                ]
            )
        finally:
            ancestors.discard(marker)
    _reject(where, f"unsupported type {kind.__name__}")


def _ascii_strings(items: list[Any]) -> bool:
    # a list of plain strings holds no cycle and nothing to convert: only its type is checked
    return all(type(item) is str and item.isascii() for item in items)


def json_size_exceeds(value: object, limit: int) -> bool:
    """Whether the compact JSON of `value` would take more than `limit` bytes.

    The walk stops as soon as the count passes `limit`, so its cost is bounded by the limit,
    not by the value: a list of a million items, or one string shared a million times, is
    refused after about `limit` bytes of work. Nothing is copied. Strings count their UTF-8
    length plus quotes (escapes are not counted, so this is a lower bound of the serialized
    size); values that are not JSON count as one byte and are left for `freeze_json` to name.
    Nesting beyond the JSON depth limit is not walked: `freeze_json` refuses it.
    """
    used = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            used += 2 + (len(item) if item.isascii() else _utf8_length(item, limit - used))
        elif isinstance(item, dict):
            used += 1 + max(len(item), 1)  # braces and commas
            nested = depth < MAX_JSON_DEPTH and used <= limit
            for key, member in item.items() if nested else ():
                if isinstance(key, str):
                    used += 3 + (len(key) if key.isascii() else _utf8_length(key, limit - used))
                else:
                    used += 1
                if type(member) is str and member.isascii():  # counted here: no push
                    used += 2 + len(member)
                elif type(member) is list and depth + 1 < MAX_JSON_DEPTH:
                    # a list member (labels, most often) counted here as the list branch would
                    used += 1 + max(len(member), 1)
                    for element in member if used <= limit else ():
                        if type(element) is str and element.isascii():
                            used += 2 + len(element)
                            if used > limit:
                                return True
                        else:
                            stack.append((element, depth + 2))
                else:
                    stack.append((member, depth + 1))
                if used > limit:
                    return True
        elif isinstance(item, list | tuple):
            used += 1 + max(len(item), 1)  # brackets and commas
            for member in item if depth < MAX_JSON_DEPTH and used <= limit else ():
                if type(member) is str and member.isascii():
                    used += 2 + len(member)
                    if used > limit:
                        return True
                else:
                    stack.append((member, depth + 1))
        elif item is None or item is True:
            used += 4
        elif item is False:
            used += 5
        elif isinstance(item, int):
            # exact within the 64-bit range JSON allows; a huge int is only estimated
            used += len(str(item)) if item.bit_length() <= 64 else item.bit_length() * 3 // 10
        elif isinstance(item, float):
            used += len(repr(item))
        else:
            used += 1
        if used > limit:
            return True
    return False


def _utf8_length(text: str, room: int) -> int:
    # only a string that may still fit is encoded, so the work stays bounded by the limit
    if len(text) > room:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def thaw_json(value: Any) -> Any:
    """Return a plain, mutable copy (dicts and lists) of a JSON value."""
    if isinstance(value, dict):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw_json(item) for item in value]
    return value


def canonical_json(value: Any) -> bytes:
    """Canonical JSON of an already-checked value: keys sorted by code point, no whitespace."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# hashlib lets go of the GIL while it hashes 2,048 bytes or more in one call; on the event
# loop's thread, with worker threads busy, getting it back costs more than hashing a View
_GIL_HELD_BYTES = 2_047


def content_hash(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of an already-checked value.

    Fed to the hash in pieces that keep the GIL (a View's JSON is several KB).
    """
    data = memoryview(canonical_json(value))
    hashed = hashlib.sha256()
    for start in range(0, len(data), _GIL_HELD_BYTES):
        hashed.update(data[start : start + _GIL_HELD_BYTES])
    return hashed.hexdigest()


def digest(prefix: str, value: Any) -> str:
    """`<prefix>:<sha256 hex>` of the canonical JSON of an already-checked value."""
    return f"{prefix}:{content_hash(value)}"


def configuration_digest(value: object) -> str:
    """Digest a configuration value as `config:<sha256 hex>` of its canonical JSON.

    Raises:
        JsonValueError: `value` is not JSON-safe.
    """
    return digest("config", freeze_json(value, what="configuration"))


def unique(items: Iterable[str]) -> bool:
    """Whether no string occurs twice."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return False
        seen.add(item)
    return True
