"""`mnemon mcp` as a real process: over stdio with the SDK's client, and over HTTP with a token."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
from click.testing import CliRunner
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mnemon_mcp import WAKE_URI, command
from pydantic import AnyUrl

import mnemon
from mnemon._cli._starter import starter_profile

MNEMON = str(Path(sys.executable).with_name("mnemon"))
TEA = "Ada takes her tea with oat milk."


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "mnemon.toml"
    path.write_text(starter_profile(), encoding="utf-8")
    return path


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def accept(
    context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept")


async def test_stdio_end_to_end(profile: Path) -> None:
    server = StdioServerParameters(
        command=MNEMON, args=["mcp", "-p", str(profile), "--user", "ada"], env=dict(os.environ)
    )
    with anyio.fail_after(50):
        async with (
            stdio_client(server) as (read, write),
            ClientSession(read, write, elicitation_callback=accept) as client,
        ):
            initialized = await client.initialize()
            tools = {tool.name for tool in (await client.list_tools()).tools}
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            wake = (await client.read_resource(AnyUrl(WAKE_URI))).contents[0]
            empty = await client.call_tool("recall", {"query": "tea"})
            written = await client.call_tool("remember", {"text": TEA})
            await client.call_tool("refresh", {})
            found = await client.call_tool("recall", {"query": "tea oat milk"})
    assert initialized.serverInfo.name == "mnemon"
    assert initialized.serverInfo.version == mnemon.__version__
    assert initialized.capabilities.tools is not None
    assert {"recall", "remember", "refresh"} <= tools
    assert resources == [WAKE_URI]
    assert isinstance(wake, types.TextResourceContents)
    assert "\n- remember: " in wake.text
    assert text_of(empty) == "recall: no results."
    assert text_of(written).startswith("remember: stored")
    assert TEA in text_of(found)


def test_mnemon_mcp_is_this_distributions_verb_found_by_entry_point() -> None:
    from mnemon._cli._commands import cli

    with cli.make_context("mnemon", ["mcp"]) as context:
        assert cli.get_command(context, "mcp") is command
    listed = CliRunner().invoke(cli, ["--help"])
    assert listed.exit_code == 0
    assert "  mcp " in listed.output
    helped = CliRunner().invoke(cli, ["mcp", "--help"], prog_name="mnemon")
    assert helped.exit_code == 0
    assert "Usage: mnemon mcp [OPTIONS]" in helped.output
    assert "--allow-writes" in helped.output


def test_a_missing_user_is_a_usage_error(profile: Path) -> None:
    done = CliRunner().invoke(command, ["-p", str(profile)])
    assert done.exit_code == 2
    assert "Missing option '--user'" in done.output


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    profile = tmp_path_factory.mktemp("http") / "mnemon.toml"
    profile.write_text(starter_profile(), encoding="utf-8")
    process = subprocess.Popen(
        [MNEMON, "mcp", "-p", str(profile), "--user", "ada", "--http", "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        url = token = ""
        for line in process.stderr:  # two lines, printed once listening
            if line.startswith("mnemon mcp: serving "):
                url = line.removeprefix("mnemon mcp: serving ").strip()
            if line.startswith("bearer token: "):
                token = line.removeprefix("bearer token: ").strip()
                break
        assert url.startswith("http://127.0.0.1:"), url
        assert url.endswith("/mcp")
        assert len(token) >= 32
        yield url, token
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream"}


def test_http_refuses_a_request_without_the_token(http_server: tuple[str, str]) -> None:
    url, token = http_server
    with httpx.Client(timeout=10) as http:
        missing = http.post(url, json=INITIALIZE, headers=ACCEPT)
        wrong = http.post(url, json=INITIALIZE, headers={**ACCEPT, "authorization": "Bearer x"})
        right = http.post(
            url, json=INITIALIZE, headers={**ACCEPT, "authorization": f"Bearer {token}"}
        )
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert token not in missing.text
    assert right.status_code == 200


async def test_http_serves_the_sdk_client_with_the_token(http_server: tuple[str, str]) -> None:
    url, token = http_server
    with anyio.fail_after(30):
        async with (
            httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            tools = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("recall", {"query": "tea"})
    assert "recall" in tools
    assert text_of(found) == "recall: no results."


def test_a_bad_identity_names_the_flag_and_the_rule_not_the_value(profile: Path) -> None:
    done = CliRunner().invoke(command, ["-p", str(profile), "--user", "ada\x1b[2Jx"])
    assert done.exit_code == 2
    assert "--user: must not contain control, bidi or invisible characters" in done.output
    assert "\x1b" not in done.output


def test_port_is_only_for_http(profile: Path) -> None:
    done = CliRunner().invoke(command, ["-p", str(profile), "--user", "ada", "--port", "1"])
    assert done.exit_code == 2
    assert "--port: only with --http" in done.output
