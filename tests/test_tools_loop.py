"""The agent loop of docs/hosting.md, run with a scripted fake model over the starter profile."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemon import ActionOffer, MemoryHost, load_profile
from mnemon._cli._starter import starter_profile
from mnemon.tools import ToolDispatcher, ToolSet

SCOPE = {"user_id": "ada", "workspace": "billing"}


@dataclass
class ScriptedModel:
    """Stands in for a chat API: records what it was sent, answers from a script.

    Each step of the script sees the tool definitions and the messages so far and returns a
    reply: `{"tool_calls": [...]}` or `{"text": "..."}`, shaped like an OpenAI-style response.
    """

    script: list[Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]]
    seen_tools: list[list[dict[str, Any]]] = field(default_factory=list)
    seen_messages: list[list[dict[str, Any]]] = field(default_factory=list)

    def create(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.seen_tools.append(tools)
        self.seen_messages.append([dict(m) for m in messages])
        return self.script.pop(0)(messages, tools)


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": json.dumps(arguments)}}


async def agent_turn(
    host: MemoryHost, model: ScriptedModel, user_text: str, authorize: Any
) -> list[dict[str, Any]]:
    """One turn of the loop in docs/hosting.md: tools in, calls out, results back."""
    async with host.turn(scope=SCOPE) as turn:
        tools = ToolSet(turn.view)
        dispatcher = ToolDispatcher(turn, tools=tools, authorize=authorize)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": turn.wake(tools="native")},
            {"role": "user", "content": user_text},
        ]
        for _ in range(8):  # a host bounds its own loop
            reply = model.create(messages=messages, tools=tools.definitions("openai"))
            if not reply.get("tool_calls"):
                messages.append({"role": "assistant", "content": reply["text"]})
                break
            messages.append({"role": "assistant", "tool_calls": reply["tool_calls"]})
            for tool_call in reply["tool_calls"]:
                result = await dispatcher.execute(
                    tool_call["function"]["name"],
                    tool_call["function"]["arguments"],
                    idempotency_key=tool_call["id"],
                )
                messages.append(result.openai_message(tool_call["id"]))
        return messages


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    return {tool["function"]["name"] for tool in tools}


async def test_a_scripted_model_writes_in_one_turn_and_recalls_in_the_next(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text(starter_profile(), encoding="utf-8")
    asked: list[str] = []

    def authorize(offer: ActionOffer) -> bool:
        asked.append(offer.action_id)
        return True

    def remember(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        assert {"recall", "remember"} <= tool_names(tools)
        text = {"text": "Ada takes her tea with oat milk.", "space": "personal"}
        return {"tool_calls": [call("remember", text, "call-1")]}

    def done(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        assert messages[-1]["role"] == "tool"
        assert messages[-1]["tool_call_id"] == "call-1"
        assert messages[-1]["content"].startswith("remember: stored: memory ")
        return {"text": "Noted."}

    def recall(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tool_calls": [call("recall", {"query": "tea milk"}, "call-2")]}

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        assert "Ada takes her tea with oat milk." in messages[-1]["content"]
        return {"text": "With oat milk."}

    model = ScriptedModel([remember, done, recall, answer])
    async with load_profile(profile).open_host() as host:
        first = await agent_turn(host, model, "Remember how I take my tea.", authorize)
        second = await agent_turn(host, model, "How do I take my tea?", authorize)
    assert model.script == []
    assert asked == ["remember"]
    assert first[-1] == {"role": "assistant", "content": "Noted."}
    assert second[-1] == {"role": "assistant", "content": "With oat milk."}
    # the compact Wake names the tools and leaves the schemas to the definitions
    system = model.seen_messages[0][0]["content"]
    assert "- recall: " in system
    assert '"input_schema"' not in system


async def test_a_model_that_misbehaves_gets_results_and_the_loop_goes_on(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text(starter_profile(), encoding="utf-8")

    def mistakes(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tool_calls": [
                {"id": "a", "function": {"name": "recall", "arguments": "{not json"}},
                {"id": "b", "function": {"name": "search_web", "arguments": "{}"}},
                call("remember", {"text": "x"}, "c"),
            ]
        }

    def read_results(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        assert "not valid JSON" in results["a"]
        assert "no memory tool named 'search_web'" in results["b"]
        assert "not authorized; nothing was stored" in results["c"]
        return {"text": "Sorry."}

    model = ScriptedModel([mistakes, read_results])
    async with load_profile(profile).open_host() as host:
        messages = await agent_turn(host, model, "hi", lambda offer: False)
    assert messages[-1]["content"] == "Sorry."
    assert model.script == []
