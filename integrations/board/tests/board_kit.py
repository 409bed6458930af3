"""The board as a user runs it (helpers of its tests): `mnemon board` in a folder `mnemon init` made, or one with a
third-party Source dropped in; a browser (Debian's Chromium, driven by Playwright) or a plain
HTTP client in front of it."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
from mnemon_board import Board, create_app

MNEMON = str(Path(sys.executable).parent / "mnemon")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[1] / ".screenshots"
SECRET = "sk-live-BOARD-SECRET-4242"
# plugin-provided text that would run, break out of an attribute or a link, or flip the page
HOSTILE = (
    '<script>window.__pwned = 1</script>"><img src=x onerror="window.__pwned=2">'
    '<a href="javascript:window.__pwned=3">go</a> \u202eevil\u202c'
)


IN_PROCESS_HOST = "127.0.0.1:8766"


@asynccontextmanager
async def in_process(folder: Path) -> AsyncIterator[tuple[Board, httpx.AsyncClient]]:
    """The board of `folder`'s profile in this process (its public `Board` and `create_app`),
    and a client that opened its address: it holds the token's cookie and sends the page's
    CSRF token, asking for the JSON answers the page's script reads."""
    async with Board.open(folder / "mnemon.toml") as board:
        app = create_app(board, token="t0ken", hosts=[IN_PROCESS_HOST], port=8766)
        transport = httpx.ASGITransport(app=app)
        base = f"http://{IN_PROCESS_HOST}"
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            assert (await client.get("/?token=t0ken")).status_code == 303
            client.headers.update(
                {"X-CSRF-Token": csrf_of((await client.get("/plugins")).text),
                 "Accept": "application/json"}
            )  # fmt: skip
            yield board, client


def csrf_of(page: str) -> str:
    """The CSRF token a page carries."""
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found is not None
    return found[1]


def environment(folder: Path) -> dict[str, str]:
    variables = {**os.environ, "MNEMON_HOME": str(folder / "home"), "NO_COLOR": "1"}
    variables.pop("MNEMON_PROFILE", None)
    return variables


def mnemon(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`mnemon ARGUMENTS` in `folder`, as a user types it."""
    return subprocess.run(
        [MNEMON, "--no-color", *arguments],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment(folder),
    )


@dataclass
class Running:
    """A `mnemon board` process: its address, its token, and what it printed."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    folder: Path
    printed: list[str] = field(default_factory=list)

    @property
    def profile(self) -> Path:
        return self.folder / "mnemon.toml"

    def client(self) -> httpx.Client:
        """A client that opened the printed address (so it holds the token's cookie)."""
        client = httpx.Client(base_url=self.base, timeout=60, follow_redirects=False)
        opened = client.get(f"/?token={self.token}")
        assert opened.status_code == 303, opened.text
        return client

    def csrf(self, client: httpx.Client) -> str:
        page = client.get("/plugins").text
        found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert found is not None
        return found[1]


def _drain(stream: IO[bytes], into: list[str]) -> None:
    # the board's later output is kept (and its pipe never fills up and blocks it)
    for line in iter(stream.readline, b""):
        into.append(line.decode("utf-8", errors="replace"))


def start_board(folder: Path, *arguments: str) -> Running:
    """Start `mnemon board --port 0` in `folder` and read the address it prints."""
    process = subprocess.Popen(
        [MNEMON, "--no-color", "board", "--port", "0", *arguments],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment(folder),
    )
    assert process.stderr is not None
    descriptor = process.stderr.fileno()
    buffer = b""
    # a deadline for the process to start (it imports the plugins), not a timed assertion
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([descriptor], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        chunk = os.read(descriptor, 65536)
        if not chunk:
            break
        buffer += chunk
        found = re.search(rb"open: (http://[^/\s]+)/\?token=(\S+)\n", buffer)
        if found:
            printed = buffer.decode("utf-8", errors="replace").splitlines(keepends=True)
            running = Running(process, found[1].decode(), found[2].decode(), folder, printed)
            threading.Thread(
                target=_drain, args=(process.stderr, running.printed), daemon=True
            ).start()
            return running
    process.kill()
    process.wait()
    process.stderr.close()
    raise AssertionError(f"mnemon board did not start: {buffer.decode(errors='replace')}")


def stop_board(running: Running) -> None:
    running.process.terminate()
    try:
        running.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        running.process.kill()
        running.process.wait()
    if running.process.stderr is not None:
        running.process.stderr.close()


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=True)


WEATHER_MANIFEST = f"""\
[plugin]
id = "weather"
version = "1.0.0"
display_name = {_q("Weather " + HOSTILE)}
description = {_q("Local weather notes. " + HOSTILE)}
mnemon = ">=0.1.0 <0.2.0"

[[plugin.contributes.entries]]
name = "weather"
plugin = "weather_source"
installs = ["source"]

[plugin.contributes.entries.config_schema]
type = "object"
additionalProperties = false

[plugin.contributes.entries.config_schema.properties.city]
type = "string"
maxLength = 40
title = {_q("City " + HOSTILE)}
description = {_q("Where. " + HOSTILE)}

[plugin.contributes.entries.config_schema.properties.max_items]
type = "integer"
minimum = 1
maximum = 50
default = 5
title = "Items"
x-mnemon-input = "number"

[plugin.contributes.entries.config_schema.properties.units]
type = "string"
enum = ["metric", "imperial"]
default = "metric"
title = "Units"

[plugin.contributes.entries.config_schema.properties.verbose]
type = "boolean"
default = false
title = "Verbose"

[plugin.contributes.entries.config_schema.properties.tags]
type = "array"
items = {{ type = "string" }}
maxItems = 4
title = "Tags"
x-mnemon-input = "string-list"

[plugin.contributes.entries.config_schema.properties.notes]
type = "string"
title = "Notes"
x-mnemon-input = "textarea"

[plugin.contributes.entries.config_schema.properties.sources]
type = "array"
items = {{ type = "string" }}
title = "Related Sources"
x-mnemon-input = "source-list"

[plugin.contributes.entries.config_schema.properties.access_key]
type = "string"
writeOnly = true
format = "password"
title = "API token"
"""

WEATHER_SOURCE = textwrap.dedent(
    '''
    """A third-party Source, written against the public SDK only.

    Its observations are records (the core's records contract): listed a page at a time,
    added idempotently, deleted by id, fenced by a revision that moves with every change.
    """
    import hashlib
    import json
    from pathlib import Path

    from mnemon import Fragment
    from mnemon.sdk import (
        ManagementResult, RevisionConflict, SourceFacts, ViewContribution, define_memory_plugin,
        define_memory_source, install_memory,
    )

    memory_plugin = define_memory_plugin(
        "weather-source", "Weather", "Local weather notes.", ["source"], ["weather.notes"]
    )

    OBSERVATION = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "city": {"type": "string", "minLength": 1, "maxLength": 40},
            "note": {"type": "string", "minLength": 1, "maxLength": 500},
            "temperature": {"type": ["number", "null"], "minimum": -90, "maximum": 60},
        },
        "required": ["city", "note"],
        "additionalProperties": False,
    }


    class Weather:
        def __init__(self, init):
            if init.configuration.get("city") == "nowhere":
                raise ValueError("no weather there")
            self.key = init.instance_key
            self.down = Path(init.config_dir or ".") / "weather-down"
            self.store = Path(init.config_dir or ".") / "weather-observations.json"
            self.city = init.configuration.get("city", "Lisbon")

        def _load(self, scope):
            data = json.loads(self.store.read_text()) if self.store.exists() else {}
            return data, data.setdefault(scope.user_id or "-", {"records": [], "keys": {}, "next": 1})

        def _revision(self, scope):
            _, mine = self._load(scope)
            text = json.dumps(mine, sort_keys=True).encode()
            return "w-" + hashlib.sha256(text).hexdigest()[:16]

        async def facts(self, request):
            if self.down.exists():
                return SourceFacts(instance_key=self.key, type_id="weather", role="notes",
                                   availability="unavailable", reason="upstream-down")
            return SourceFacts(instance_key=self.key, type_id="weather", role="notes",
                               availability="ready", revision=self._revision(request.scope),
                               capabilities=["project"])

        async def project(self, request):
            text = f"Sunny in {self.city}."[: request.max_characters]
            return ViewContribution(
                fragments=[Fragment(source_key=self.key, mode=request.mode, text=text)])

        async def manage(self, request):
            operation, value, scope = request.operation.id, request.input, request.scope
            data, mine = self._load(scope)
            records = mine["records"]
            if operation == "records-read":
                start = int(value.get("cursor") or 0)
                end = start + value["limit"]
                output = {"records": records[start:end],
                          "next_cursor": str(end) if end < len(records) else None}
                return ManagementResult(source_key=self.key, operation=operation, output=output)
            if request.expected_revision != self._revision(scope):
                raise RevisionConflict("the observations changed")
            if operation == "records-write":
                results = []
                for index, item in enumerate(value["records"]):
                    record, key = item["record"], item["idempotency_key"]
                    if key in mine["keys"]:
                        results.append({"index": index, "completion": "committed",
                                        "id": mine["keys"][key], "replayed": True})
                    elif "hail" in record["note"]:
                        results.append({"index": index, "completion": "refused",
                                        "code": "invalid-record",
                                        "message": "note: hail is not kept here"})
                    else:
                        made = {"id": f"o{mine['next']}", **record}
                        mine["next"] += 1
                        records.append(made)
                        mine["keys"][key] = made["id"]
                        results.append({"index": index, "completion": "committed",
                                        "id": made["id"]})
                output = {"results": results}
            else:  # records-delete
                kept = [record for record in records if record["id"] != value["id"]]
                output = {"id": value["id"], "deleted": len(kept) < len(records)}
                mine["records"] = kept
            self.store.write_text(json.dumps(data))
            return ManagementResult(source_key=self.key, operation=operation, output=output)


    SOURCE = define_memory_source(
        {"type_id": "weather", "package_name": "weather-source", "role": "notes",
         "capabilities": ["project"], "consistency": "exact-snapshot",
         "management": {
             "label": "Weather observations",
             "description": "Observations people keep beside the forecast.",
             "records": [{
                 "id": "observation", "label": "Observation", "record_schema": OBSERVATION,
                 "readable": True, "writable": True, "deletable": True,
                 "label_field": "note", "key_fields": ["city", "note"],
             }],
         }}, Weather)


    def apply(ctx):
        install_memory(ctx, plugin=memory_plugin, sources=[SOURCE])
    '''
)

THIRD_PARTY_PROFILE = f"""\
# a profile with a third-party Source beside a first-party one
data_dir = ".mnemon"

[strategy]
use = "general"

# the weather notes, from a drop-in plugin
[[entries]]
id = "weather"
plugin = "weather"
[entries.config]
city = "Lisbon"
access_key = "{SECRET}"

[[entries]]
id = "runtime"
plugin = "runtime"

[[entries]]
id = "general"
plugin = "general"
"""


# ------------------------------------------------------------------ the browser


def screenshot(page: Any, name: str) -> Path:
    """Write the page's screenshot under `.screenshots/` (git ignores it) for a reviewer."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
