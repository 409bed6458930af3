"""The demo behind `make demo`: the notes and focus examples, one turn end to end.

It writes a sample notes file under `.mnemon-demo/examples/` (or the folder given as its
argument), mounts the `notes` Source and the `focus`
Strategy from `examples/`, opens a turn and prints its Wake, reads the `read` route, runs an
authorized `replace` and prints its receipt, shows that the turn still reads its pinned
snapshot while the next turn sees the write, and prints the host's report. Re-running it is
safe: the notes file is rewritten each time.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import mnemon_example_focus as focus
import mnemon_example_notes as notes

from mnemon import ActionOffer, MemoryHost

DEMO_DIR = Path(__file__).resolve().parent.parent / ".mnemon-demo" / "examples"
SAMPLE = """\
# Working notes
- The user is Ada; she prefers short answers with code first.
- Project: a Rust port of the billing service; deadline Friday.
- Avoid suggesting {{template}} engines: she writes {raw} strings on purpose.
"""


def heading(title: str) -> None:
    """Print a section heading."""
    print(f"\n=== {title} " + "=" * max(0, 66 - len(title)))


def prepare(directory: Path) -> Path:
    """Write the sample notes under `directory`; their path."""
    directory.mkdir(parents=True, exist_ok=True)
    notes_path = directory / "notes.md"
    notes_path.write_text(SAMPLE, encoding="utf-8")
    return notes_path


async def main(notes_path: Path) -> None:
    """Compose one View on the sample notes, read, write, and print the Wake and the report."""
    async with MemoryHost(source_timeout=5.0) as host:
        await host.mount(notes, instance_id="notes", config={"path": str(notes_path)})
        await host.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        started = time.perf_counter()
        async with host.turn(scope={"user_id": "ada"}, scenario="agent.root-turn") as turn:
            elapsed = (time.perf_counter() - started) * 1000
            heading("View")
            print(f"id          {turn.view.id}")
            print(f"generation  {turn.view.generation_id}")
            print(f"explanation {turn.view.explanation}")
            print(f"composed in {elapsed:.2f} ms")
            heading("Wake (what the model sees)")
            print(turn.wake())

            heading("Route source:notes/read")
            evidence = await turn.execute_route("source:notes/read", {})
            print(f"{len(evidence.items)} item(s), truncated={evidence.truncated}")
            print(evidence.items[0].text.splitlines()[1])

            heading("Authorized action source:notes/replace")

            def authorize(offer: ActionOffer) -> bool:
                print(f"authorize? {offer.id}: {offer.description} -> yes")
                return True

            updated = SAMPLE + "- New today: the deadline moved to Monday.\n"
            receipt = await turn.execute_action(
                "source:notes/replace", {"text": updated}, authorize, idempotency_key="demo-1"
            )
            print(json.dumps(receipt.model_dump(), indent=2))

            pinned = await turn.execute_route("source:notes/read", {})
            moved = "moved to Monday" in pinned.items[0].text
            print(f"this turn still reads its pinned snapshot: {not moved}")
        async with host.turn(scope={"user_id": "ada"}) as following:
            shown = "moved to Monday" in following.wake()
            print(f"the next turn's View shows the write: {shown}")
        heading("inspect()")
        print(json.dumps(host.inspect(), indent=2))


if __name__ == "__main__":
    anyio.run(main, prepare(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DEMO_DIR))
