"""An approximate nearest-neighbour index over one partition's vectors: faiss HNSW.

Exact search reads every vector of a partition for every query: about 1 ms per 10,000
384-dimensional vectors on one core, so 100,000 cost more than the query's encoding. Past
a size (`approximate_above`), the SQLite Provider builds an HNSW graph of the partition's
vectors with faiss, off the request path, and searches it instead; until the graph is
ready, and for what changed since it was built, search stays exact.

faiss (`faiss-cpu`, the `vectors` extra) was chosen for being the most used and best kept
library of its kind (Meta's, with wheels for Linux, macOS and Windows and numpy as its only
dependency), its HNSW index reaching recall near 1 at a fraction of a millisecond per query
at this size. It is imported only here, when a partition first grows past the size; without
it, search stays exact (the Provider's status says which).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["HNSW_CONNECTIONS", "build_index", "exact_search", "faiss", "search_index"]

_log = logging.getLogger("mnemon.spaces")

#: graph links per vector (HNSW `M`): 32 keeps recall near 1 for sentence embeddings
HNSW_CONNECTIONS = 32
#: candidates examined while building (`efConstruction`)
BUILD_DEPTH = 80
#: candidates examined per query (`efSearch`), at least the results asked for
SEARCH_DEPTH = 96

_faiss: Any = None
_missing = False


def faiss() -> Any | None:
    """faiss, imported on first use; None when it is not installed."""
    global _faiss, _missing
    if _faiss is None and not _missing:
        try:
            import faiss as module
        except ModuleNotFoundError:
            _missing = True
            _log.debug("spaces: faiss is not installed; vector search stays exact")
            return None
        # one thread per search: a request's worker thread, beside others, is the unit here
        module.omp_set_num_threads(1)
        _faiss = module
    return _faiss


def build_index(matrix: Any, metric: str) -> Any:
    """An HNSW index of `matrix`'s rows (row i has label i), for `metric`.

    Cosine vectors are stored unit length, so cosine and dot both rank by inner product.
    """
    module = faiss()
    assert module is not None
    kind = module.METRIC_L2 if metric == "l2" else module.METRIC_INNER_PRODUCT
    index = module.IndexHNSWFlat(matrix.shape[1], HNSW_CONNECTIONS, kind)
    index.hnsw.efConstruction = BUILD_DEPTH
    index.add(matrix)
    return index


def search_index(index: Any, query: Any, count: int, metric: str) -> tuple[Any, Any]:
    """The `count` nearest rows: (labels, raw similarity, higher is nearer)."""
    module = faiss()
    assert module is not None
    parameters = module.SearchParametersHNSW()
    parameters.efSearch = max(SEARCH_DEPTH, count)
    distances, labels = index.search(query.reshape(1, -1), count, params=parameters)
    return _similar(labels[0], distances[0], metric)


def exact_search(matrix: Any, query: Any, count: int, metric: str) -> tuple[Any, Any]:
    """The `count` nearest rows of `matrix`, exactly: (rows, raw similarity, higher nearer).

    faiss's exhaustive scan on one thread: about twice numpy's product, with no BLAS threads
    to wake (whose hand-offs, beside a query being encoded, made numpy's tail slow).
    """
    module = faiss()
    assert module is not None
    kind = module.METRIC_L2 if metric == "l2" else module.METRIC_INNER_PRODUCT
    distances, labels = module.knn(query.reshape(1, -1), matrix, count, metric=kind)
    return _similar(labels[0], distances[0], metric)


def _similar(labels: Any, distances: Any, metric: str) -> tuple[Any, Any]:
    found = labels >= 0
    raw = distances[found]
    if metric == "l2":
        raw = -(raw.clip(min=0.0) ** 0.5)  # squared distances from faiss
    return labels[found], raw
