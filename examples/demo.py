"""The demo behind `make demo`: mount the notes and focus examples and compose one View.

It writes a sample notes file under `.mnemon-demo/`, mounts the `notes` Source and the `focus`
Strategy from `examples/`, opens one turn, and prints the Wake and the host's report.
Re-running it is safe: the notes file is rewritten each time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import mnemon_example_focus as focus
import mnemon_example_notes as notes

from mnemon import MemoryHost

DEMO_DIR = Path(__file__).resolve().parent.parent / ".mnemon-demo"
SAMPLE = """\
# Working notes
- The user is Ada; she prefers short answers with code first.
- Project: a Rust port of the billing service; deadline Friday.
- Avoid suggesting {{template}} engines: she writes {raw} strings on purpose.
"""


def heading(title: str) -> None:
    """Print a section heading."""
    print(f"\n=== {title} " + "=" * max(0, 66 - len(title)))


async def main() -> None:
    """Write the sample notes, compose one View, print the Wake and the report."""
    DEMO_DIR.mkdir(exist_ok=True)
    notes_path = DEMO_DIR / "notes.md"
    notes_path.write_text(SAMPLE, encoding="utf-8")
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
        heading("inspect()")
        print(json.dumps(host.inspect(), indent=2))


if __name__ == "__main__":
    anyio.run(main)
