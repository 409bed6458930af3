"""What a hosted ranker may search by meaning: the host's vector space, through the route.

A Quivr search offers the plugin the vector spaces it may name in `near_vector` and `hybrid`
requests. A turn policy never reaches an embedder: it serves every candidate request by
reading the ranked route, so a space is offered only when that route can be asked how to
search, by the core's convention for reads by meaning (a `mode` input of `words`, `meaning`
and `both`, and `meaning_weight`: docs/authoring.md). Each request is then served as it asks:
`bm25` with `mode: "words"`, `near_vector` with `"meaning"`, `hybrid` with `"both"` and its
`alpha` as the weight of meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemon.sdk import VectorSpace, ViewRoute

__all__ = ["MODES", "offered_spaces", "query_mode", "searches_by_meaning"]

#: the values of a route's `mode` input, by the core's convention
MODES = frozenset({"words", "meaning", "both"})
#: the client's mode, in Quivr's words (a hint the plugin may follow)
_QUIVR_MODE = {"words": "lexical", "meaning": "semantic", "both": "hybrid"}


def searches_by_meaning(route: ViewRoute) -> bool:
    """Whether the route follows the convention: `mode` with all three values, `meaning_weight`.

    Only such a route can serve each primitive as asked; any other is read as it is, and
    offered no space.
    """
    properties = route.input_schema.get("properties") or {}
    mode = properties.get("mode")
    values = mode.get("enum") if isinstance(mode, Mapping) else None
    return (
        isinstance(values, Sequence)
        and MODES.issubset(str(value) for value in values)
        and "meaning_weight" in properties
    )


def query_mode(value: Mapping[str, Any], by_meaning: bool) -> str:
    """The search's `query.mode`: the user's own `mode` on a route by meaning, else lexical."""
    if not by_meaning:
        return "lexical"
    return _QUIVR_MODE.get(str(value.get("mode", "both")), "hybrid")


def offered_spaces(
    spaces: Sequence[VectorSpace], manifest: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The spaces a search over a route by meaning offers: the host's only one, or none.

    The route searches in the space its Source chose, which a policy cannot see. With one
    space installed in the host it is that one; with several it could be any of them, and
    serving a request for one with another's results would mislead the plugin, so none is
    offered (requests naming one are then `unknown_space`).
    """
    if len(spaces) != 1:
        return []
    return [_quivr_space(spaces[0], manifest)]


def _quivr_space(space: VectorSpace, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """One space as a Quivr search request describes it.

    The id is the space's identity `id@version`. Coverage is the protocol's placeholder for a
    Corpus without a completed snapshot, zero of zero: mnemon keeps no coverage snapshot (a
    Source embeds what lacks vectors before it searches by meaning, and its management
    plane counts what still waits), and the counts never gate what is served.
    """
    return {
        "id": space.key,
        "owner": _owner(space, manifest),
        "model": space.model,
        "dimensions": space.dimensions,
        "metric": space.metric,
        "indexes": ["text"],
        "query_modalities": ["text"],
        "role": "served",
        "coverage": {"segments": 0, "total": 0},
    }


def _owner(space: VectorSpace, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The plugin itself when its own ingestion Contribution declares the space, else mnemon.

    Any other space belongs to an embedder the host installed, which encodes the query on the
    engine's side as far as the plugin can tell.
    """
    contributions = manifest.get("contributions") or {}
    declared = ((contributions.get("ingestion") or {}).get("spaces") or {}).get(space.id)
    if isinstance(declared, Mapping) and str(declared.get("version")) == space.version:
        return {
            "kind": "plugin",
            "plugin_id": manifest["id"],
            "plugin_version": manifest["version"],
        }
    return {"kind": "engine"}
