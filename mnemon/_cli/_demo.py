"""`mnemon demo`: a starter profile, a small realistic data set, and turns end to end."""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .._host import MemoryHost, MemoryTurn
from .._models import ActionOffer, Scope
from .._profile import PROFILE_FILE, load_profile
from ._paths import shown_path
from ._render import Printer
from ._starter import starter_profile

__all__ = ["DEFAULT_DIRECTORY", "MARKER", "prepare_demo", "run_demo"]

_T = TypeVar("_T")

SCOPE = Scope(user_id="ada", agent_id="assistant", workspace="billing-port")
USER_FACTS = (
    ("Ada is the tech lead of the billing team; she prefers short answers, code first.", 5),
    ("Ada works in Berlin (CET) and reviews pull requests in the morning.", 3),
)
AGENT_NOTES = (("Ada asked to always mention migration risks when touching invoices.", 4),)
DOCUMENTS = (
    (
        "Billing port plan",
        "# Billing port plan\n\nWe port the billing service from Python to Rust in three "
        "steps: invoices, payments, then reporting. The invoice step ships first.\n",
    ),
    (
        "Decision log",
        "# Decision log\n\n- 2026-11-02: keep PostgreSQL; no new database.\n"
        "- 2026-11-16: the invoice API stays backward compatible for one release.\n",
    ),
    (
        "Runbook",
        "# Runbook\n\nIf invoice generation stalls, check the job queue depth first, then "
        "the PDF renderer's memory.\n",
    ),
)
MEMORIES = (
    ("The invoice step of the billing port is due on Friday, December 4th.", "project",
     ["deadline", "invoices"], ["billing-port"]),
    ("Ada's team dislikes long design documents; one page is the norm.", "personal",
     ["preference"], ["ada"]),
    ("The payments step waits for the new fraud checks from the risk team.", "project",
     ["dependency"], ["risk-team"]),
    ("Ada said the reporting step can slip to January if needed.", "project",
     ["deadline", "reporting"], ["billing-port"]),
)  # fmt: skip
NEW_MEMORY = "The invoice deadline moved to Monday, December 7th, after the fraud review."
DEFAULT_DIRECTORY = ".mnemon-demo"
MARKER = ".mnemon-demo-folder"
_STARTER_HEADER = starter_profile("data").splitlines()[0]
MARKER_TEXT = (
    "This folder was created by `mnemon demo`, which replaces mnemon.toml and data/ here "
    "on every run.\n"
)


def _allow(offer: ActionOffer) -> bool:
    return True


class _Clock:
    """Wall-clock timings of the demo's steps, in milliseconds."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    async def time(self, name: str, step: Callable[[], Awaitable[_T]]) -> _T:
        started = time.perf_counter()
        result = await step()
        self.steps.append((name, (time.perf_counter() - started) * 1000))
        return result


async def _seed(host: MemoryHost, printer: Printer) -> None:
    """Write the demo's data through the same authorized actions a model would use."""
    async with host.turn(scope=SCOPE, scenario="demo.seed") as turn:
        entries = [("user", *fact) for fact in USER_FACTS]
        entries += [("memory", *note) for note in AGENT_NOTES]
        for target, text, importance in entries:
            await _write(
                turn,
                "runtime/mutate",
                {"target": target, "operation": "add", "text": text, "importance": importance},
            )
        for title, body in DOCUMENTS:
            await _write(turn, "documents/create", {"title": title, "body": body})
        for index, (text, space, tags, entities) in enumerate(MEMORIES):
            await _write(
                turn,
                "spaces/remember",
                {"text": text, "space": space, "tags": tags, "entities": entities},
                key=f"demo-seed-{index}",
            )
    printer.ok(
        f"seeded {len(USER_FACTS) + len(AGENT_NOTES)} working-memory entries, "
        f"{len(DOCUMENTS)} documents and {len(MEMORIES)} long-term memories"
    )


async def _write(
    turn: MemoryTurn, offer: str, payload: dict[str, Any], *, key: str | None = None
) -> None:
    await turn.execute_action(f"source:{offer}", payload, _allow, idempotency_key=key)


def _made_by_demo(directory: Path) -> bool:
    """Whether the demo may rebuild `directory`: empty, marked, or an unmarked earlier demo."""
    if (directory / MARKER).is_file():
        return True
    names = {path.name for path in directory.iterdir()}
    if not names:
        return True
    if (
        directory.name != DEFAULT_DIRECTORY
        or not names <= {PROFILE_FILE, "data"}
        or not (directory / PROFILE_FILE).is_file()
    ):
        return False
    # the demo wrote no marker before it refused other folders: its default folder, holding
    # nothing but the demo's profile and data, was made by an earlier demo
    text = (directory / PROFILE_FILE).read_text(encoding="utf-8", errors="replace")
    return text.startswith(_STARTER_HEADER) and '\ndata_dir = "data"\n' in text


def prepare_demo(directory: Path, *, force: bool = False) -> Path:
    """Write the demo's profile under `directory`, clearing its previous data; its path.

    The folder must be new, empty, or one the demo created (it holds `MARKER`), unless
    `force`: the demo replaces `mnemon.toml` and deletes `data/` there.

    Raises:
        click.ClickException: the folder holds something the demo did not create.
    """
    marker = directory / MARKER
    if not force and directory.is_dir() and not _made_by_demo(directory):
        raise click.ClickException(
            f"{shown_path(directory, name_if_outside=True)} is not empty and was not created "
            "by `mnemon demo`, which would replace its mnemon.toml and delete its data/; "
            "choose another --directory, or pass --force"
        )
    directory.mkdir(parents=True, exist_ok=True)
    marker.write_text(MARKER_TEXT, encoding="utf-8")
    data = directory / "data"
    if data.is_symlink():
        data.unlink()  # never follow a link out of the demo's folder
    elif data.exists():
        shutil.rmtree(data)  # the demo's own data only: every run starts from the same state
    profile_path = directory / PROFILE_FILE
    profile_path.write_text(starter_profile("data"), encoding="utf-8")
    return profile_path


async def run_demo(profile_path: Path, printer: Printer) -> bool:
    """Seed the demo profile's Sources and run the turns a host would run.

    Returns:
        Whether the second turn recalled the memory the first one wrote.
    """
    directory = profile_path.parent
    printer.heading(f"profile {shown_path(profile_path, name_if_outside=True)}")
    clock = _Clock()
    profile = load_profile(profile_path)
    async with profile.open_host() as host:
        await clock.time("seed", lambda: _seed(host, printer))

        turn = await clock.time("compose turn 1", lambda: host.begin_turn({"scope": SCOPE}))
        try:
            printer.heading("Wake of turn 1 (what the model sees)")
            printer.line(turn.wake())
            recall = await clock.time(
                "recall route",
                lambda: turn.execute_route(
                    "source:spaces/recall", {"query": "When is the invoice deadline?"}
                ),
            )
            printer.evidence(recall)

            def authorize(offer: ActionOffer) -> bool:
                printer.line(f"host: authorize {offer.id}? yes (the demo user agreed)")
                return True

            printer.heading("An authorized remember")
            receipt = await clock.time(
                "remember action",
                lambda: turn.execute_action(
                    "source:spaces/remember",
                    {"text": NEW_MEMORY, "space": "project", "tags": ["deadline", "invoices"]},
                    authorize,
                    idempotency_key="demo-new-deadline",
                ),
            )
            printer.receipt(receipt)
        finally:
            await turn.release()

        async with host.turn(scope=SCOPE) as following:
            again = await clock.time(
                "recall in turn 2",
                lambda: following.execute_route(
                    "source:spaces/recall", {"query": "invoice deadline moved"}
                ),
            )
            printer.heading("Turn 2 sees the new memory")
            printer.evidence(again)
            found = any("December 7th" in item.text for item in again.items)
            (printer.ok if found else printer.warn)(
                "the new memory is recalled" if found else "the new memory was not recalled"
            )
            printer.heading("Diagnostics")
            if following.view.diagnostics:
                for diagnostic in following.view.diagnostics:
                    printer.warn(f"{diagnostic.code}: {diagnostic.message}")
            else:
                printer.ok("none: every Source answered in time")

        printer.heading("inspect()")
        report = host.inspect()
        if isinstance(report.get("data_dir"), str):
            report["data_dir"] = shown_path(Path(report["data_dir"]), directory)
        printer.report(report)
    printer.heading("Timings")
    for name, milliseconds in clock.steps:
        printer.field(name, f"{milliseconds:8.2f} ms")
    shown = shown_path(directory, name_if_outside=True)
    printer.line(f"\nprofile and data: {shown} (rebuilt on every run)")
    return found
