"""`mnemon reindex`: give stored memories the vectors recall by meaning needs and lacks.

Any Source may offer it: a management operation `reindex` (kind `mutate`, input `{}`) that
embeds what it can within one call and answers `{"done": int, "remaining": int | null}`
(`remaining` null when the Source cannot count). The command calls it until nothing remains,
or until a call gets nothing done (the embedder or the store is not keeping up: the rest
waits, and the Source's own catch-up or the next `mnemon reindex` finishes it). `mnemon
import` runs the same loop after it writes, so imported memories are found by meaning as
soon as it returns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .._errors import ManagementError
from .._host import MemoryHost
from .._models import ManagementEntry, Scope
from ._options import (
    CommandError,
    confirm,
    echo_json,
    identity,
    json_option,
    not_confirmed,
    printer_of,
    profile_path,
    run,
    scope_of,
)
from ._progress import progress
from ._records import mutate
from ._session import open_memory

__all__ = ["REINDEX", "Reindexed", "fill_vectors", "register", "reindexable"]

REINDEX = "reindex"


@dataclass(slots=True)
class Reindexed:
    """How far one Source's reindex got: counted as it goes, so an interruption says it too."""

    source: str
    done: int = 0
    #: memories still without vectors; None when the Source does not count them
    remaining: int | None = None
    #: the error code of a call that failed, when one did
    failed: str | None = None

    def as_json(self) -> dict[str, Any]:
        counts = {"done": self.done, "remaining": self.remaining}
        return {"source": self.source, **counts, "failed": self.failed}


def reindexable(host: MemoryHost) -> list[ManagementEntry]:
    """The mounted Sources whose management plane has a `reindex` mutation."""
    return [
        entry
        for entry in host.management_catalog()
        if any(op.id == REINDEX and op.kind == "mutate" for op in entry.operations)
    ]


def _counts(key: str, output: Any) -> tuple[int, int | None]:
    """`done` and `remaining` of one answer, checked: a Source's answer is untrusted."""
    done = output.get("done") if isinstance(output, dict) else None
    remaining = output.get("remaining") if isinstance(output, dict) else None
    counted = remaining is None or (type(remaining) is int and remaining >= 0)
    if type(done) is not int or done < 0 or not counted:
        raise CommandError(
            f"{key}/{REINDEX} answered without a count of done and remaining memories",
            code="invalid-output",
        )
    return done, remaining


async def fill_vectors(host: MemoryHost, key: str, scope: Scope, tally: Reindexed) -> bool:
    """Call `key`'s reindex until nothing remains or a call gets nothing done.

    Returns False when the Source has nothing to reindex (recall by meaning is off there).

    Raises:
        CommandError: the Source answered something that is not a count.
        ManagementError: a call failed otherwise (what was done before it is kept).
    """

    async def step() -> tuple[int, int | None]:
        result = await mutate(host, key, scope, REINDEX, {})
        done, remaining = _counts(key, result.output)
        tally.done += done
        tally.remaining = remaining
        return done, remaining

    try:
        done, remaining = await step()
    except ManagementError as exc:
        if exc.code == "unsupported":
            return False
        raise
    with progress(
        f"vectors for {key}", total=None if remaining is None else done + remaining
    ) as advance:
        advance(done)
        while remaining != 0 and done > 0:
            done, remaining = await step()
            advance(done)
    return True


def _status(tally: Reindexed | None) -> str:
    if tally is None:
        return "off"
    if tally.remaining is None:
        return "uncounted"
    return "complete" if tally.remaining == 0 else "waiting"


async def _reindex(
    path: Path, scope: Scope, source: str | None, tallies: dict[str, Reindexed | None]
) -> None:
    async with open_memory(path) as (_, host):
        entries = reindexable(host)
        if source is not None:
            wanted = source if ":" in source else f"source:{source}"
            entries = [entry for entry in entries if entry.source_key == wanted]
            if not entries:
                raise CommandError(
                    f"{wanted} is not mounted, or has no reindex operation",
                    code="unknown-source",
                )
        for entry in entries:
            tally = tallies[entry.source_key] = Reindexed(entry.source_key)
            if not await fill_vectors(host, entry.source_key, scope, tally):
                tallies[entry.source_key] = None


def _interrupted(tallies: dict[str, Reindexed | None]) -> str:
    done = sum(tally.done for tally in tallies.values() if tally is not None)
    return (
        f"interrupted: {done} memory(ies) got their vectors; the others still wait. "
        "Run `mnemon reindex` again to finish"
    )


@click.command()
@click.option("--source", default=None, help="Only this Source (its key, e.g. source:spaces).")
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def reindex(
    ctx: click.Context, /, source: str | None, yes: bool, as_json: bool, **options: Any
) -> None:
    """Give the memories of this scope the vectors recall by meaning needs and lacks.

    Memories get their vectors on their own soon after they are written; this finishes the
    work at once: after the embedder was down, or when a new embedding model or space
    version is installed. It runs the embedder on every memory that needs it.
    """
    scope = scope_of(options)
    question = "Embed every memory of this scope that lacks vectors (this runs the embedder)?"
    if not yes and not confirm(question, err=as_json):
        raise not_confirmed()
    tallies: dict[str, Reindexed | None] = {}
    job = functools.partial(_reindex, profile_path(ctx), scope, source, tallies)
    run(job, functools.partial(_interrupted, tallies))
    sources = [
        {"source": key, "status": _status(tally)}
        | ({} if tally is None else {"done": tally.done, "remaining": tally.remaining})
        for key, tally in tallies.items()
    ]
    waiting = any(entry["status"] == "waiting" for entry in sources)
    if as_json:
        echo_json({"sources": sources, "scope": scope.model_dump(exclude_none=True)})
    else:
        _say(ctx, sources)
    if waiting:
        ctx.exit(1)  # memories still wait for vectors: the lines above say how many


def _say(ctx: click.Context, sources: list[dict[str, Any]]) -> None:
    printer = printer_of(ctx)
    if not sources:
        printer.warn("nothing to reindex: no mounted Source has a reindex operation")
    for entry in sources:
        key, status = entry["source"], entry["status"]
        if status == "off":
            printer.warn(f"{key}: nothing to reindex: recall by meaning is off there")
            continue
        got = f"{entry['done']} memory(ies) got their vectors"
        if status == "complete":
            printer.ok(f"{key}: {got}; every memory in this scope has them now")
        elif status == "uncounted":
            printer.ok(f"{key}: {got}; the Source does not say whether any still wait")
        else:
            printer.warn(
                f"{key}: {got}; {entry['remaining']} still wait: the embedder or the store "
                "did not keep up (they follow on their own, or run `mnemon reindex` again)"
            )


def register(group: click.Group) -> None:
    """Add `reindex` to `group`."""
    group.add_command(reindex)
