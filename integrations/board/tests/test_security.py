"""Who may use the board, over plain HTTP: the token, its cookie, CSRF, Host, CSP, escaping."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from board_kit import (
    HOSTILE,
    MNEMON,
    SECRET,
    Running,
    environment,
    mnemon,
    start_board,
    stop_board,
)

closing: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while closing:
        closing.pop().close()


def closing_client(running: Running) -> httpx.Client:
    client = running.client()
    closing.append(client)
    return client


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One starter board for the module: these tests ask it, and one switches an entry."""
    folder = tmp_path_factory.mktemp("starter")
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    running = start_board(folder)
    yield running
    stop_board(running)


@pytest.fixture
def weather_board(third_party: Path) -> Iterator[Running]:
    running = start_board(third_party)
    yield running
    stop_board(running)


def test_every_request_without_the_token_is_refused(shared: Running) -> None:
    anonymous = httpx.Client(base_url=shared.base, timeout=30, follow_redirects=False)
    closing.append(anonymous)
    for path in ("/", "/plugins", "/status", "/options", "/static/board.js", "/nothing"):
        refused = anonymous.get(path)
        assert refused.status_code == 401, path
        assert shared.token not in refused.text
    assert anonymous.get("/plugins?token=not-the-token").status_code == 401
    assert anonymous.get("/plugins", headers={"Cookie": "mnemon-board-1=x"}).status_code == 401
    assert anonymous.post("/plugins/switch", data={"entry": "documents"}).status_code == 401


def test_the_token_becomes_an_http_only_strict_cookie_and_leaves_the_address(
    shared: Running,
) -> None:
    client = httpx.Client(base_url=shared.base, timeout=30, follow_redirects=False)
    closing.append(client)
    opened = client.get(f"/status?user=ada&token={shared.token}")
    assert opened.status_code == 303
    assert opened.headers["location"] == "/status?user=ada"
    cookie = opened.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    page = client.get("/status?user=ada")
    assert page.status_code == 200
    assert shared.token not in page.text
    # a bearer header works too (for scripts), never a wrong one
    bearer = httpx.get(
        f"{shared.base}/plugins", headers={"Authorization": f"Bearer {shared.token}"}
    )
    assert bearer.status_code == 200


def test_state_changes_need_the_pages_csrf_token_and_no_foreign_origin(shared: Running) -> None:
    client = closing_client(shared)
    csrf = shared.csrf(client)
    before = shared.profile.read_text(encoding="utf-8")
    form = {"entry": "documents", "on": "false"}
    assert client.post("/plugins/switch", data=form).status_code == 403
    assert client.post("/plugins/switch", data={**form, "csrf": "wrong"}).status_code == 403
    assert (
        client.post("/plugins/switch", data=form, headers={"X-CSRF-Token": "no"}).status_code == 403
    )
    foreign = client.post(
        "/plugins/switch",
        data={**form, "csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert shared.profile.read_text(encoding="utf-8") == before
    # with it, the same request goes through
    done = client.post(
        "/plugins/switch", data=form, headers={"X-CSRF-Token": csrf, "Accept": "application/json"}
    )
    assert done.status_code == 200, done.text
    assert done.json()["ok"] is True
    assert shared.profile.read_text(encoding="utf-8") != before


def test_only_the_printed_host_names_are_answered(shared: Running) -> None:
    # a page of another site resolving its name to 127.0.0.1 (DNS rebinding) gets nothing
    rebinding = httpx.get(
        f"{shared.base}/plugins",
        headers={"Host": "evil.example", "Authorization": f"Bearer {shared.token}"},
    )
    assert rebinding.status_code == 421
    port = shared.base.rsplit(":", 1)[1]
    local = httpx.get(
        f"{shared.base}/plugins",
        headers={"Host": f"localhost:{port}", "Authorization": f"Bearer {shared.token}"},
    )
    assert local.status_code == 200


def test_every_answer_forbids_inline_scripts_and_framing(shared: Running) -> None:
    client = closing_client(shared)
    for path in ("/plugins", "/static/board.js"):
        headers = client.get(path).headers
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert headers["x-content-type-options"] == "nosniff"
    refused = httpx.get(f"{shared.base}/plugins")
    assert "script-src 'self'" in refused.headers["content-security-policy"]
    page = client.get("/plugins").text
    # no inline script, no inline handler: the only script is the board's own file
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/board.js" defer>']
    assert not re.search(r"\son[a-z]+=", page)


def test_a_non_loopback_address_is_refused_unless_asked_for(starter: Path) -> None:
    refused = mnemon(starter, "board", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2
    assert "--host: 0.0.0.0 is not a loopback address" in refused.stderr
    assert "--allow-remote" in refused.stderr
    as_json = mnemon(starter, "board", "--host", "192.0.2.1", "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid-flag"


def test_with_json_the_address_is_one_json_document(starter: Path) -> None:
    process = subprocess.Popen(
        [MNEMON, "--no-color", "board", "--port", "0", "--json"],
        cwd=starter,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(starter),
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in iter(process.stdout.readline, b""):
            lines.append(line.decode())
            if line == b"}\n":
                break
        started = json.loads("".join(lines))
        assert started["profile"] == "mnemon.toml"
        assert started["problem"] is None
        assert started["open"].startswith(started["url"] + "?token=")
        assert httpx.get(started["open"]).status_code == 303
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def test_hostile_plugin_text_is_escaped_and_secrets_never_shown(weather_board: Running) -> None:
    client = closing_client(weather_board)
    for path in ("/plugins", "/strategy", "/options", "/status?user=ada", "/plugins?lang=zh"):
        page = client.get(path)
        assert page.status_code == 200, path
        text = page.text
        assert SECRET not in text, path
        assert "<script>window" not in text, path
        assert "<img src=x" not in text, path
        assert 'href="javascript:' not in text, path
        assert "\u202e" not in text, path  # a bidi override is shown as an escape, never obeyed
    plugins = client.get("/plugins").text
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&#34;&gt;" in plugins
    assert "\\u202eevil" in plugins
    assert HOSTILE not in plugins


def test_the_board_verb_comes_from_its_distribution_by_entry_point(starter: Path) -> None:
    listed = mnemon(starter, "--help")
    assert listed.returncode == 0
    assert re.search(r"^\s+board\s", listed.stdout, re.MULTILINE)
    help_text = mnemon(starter, "board", "--help")
    assert "--port" in help_text.stdout
    assert "--allow-remote" in help_text.stdout
