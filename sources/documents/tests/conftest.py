"""Fixtures: a runner with the documents Source and a tiny Strategy that selects it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import mnemon_source_documents as documents
import pytest
from mnemon_source_documents._files import partition_name

from mnemon import Evidence, ManagementClient, MutationReceipt, Scope
from mnemon.sdk import (
    ComposeRequest,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    define_memory_strategy,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner, RunnerTurn

KEY = "source:docs"


def allow(offer: object) -> bool:
    return True


class SelectDocuments:
    """Strategy plugin: the documents Source with a projection share, its route and actions."""

    def __init__(self, mode: str = "routed", share: int = 200) -> None:
        self.mode = mode
        self.share = share

    def apply(self, ctx: PluginContext) -> None:
        def compose(
            request: ComposeRequest,
            sources: tuple[SourceCandidate, ...],
            contributions: tuple[ExtensionContribution, ...],
        ) -> ViewSpec:
            chosen = [s for s in sources if s.key == KEY and s.facts.availability != "unavailable"]
            selections = [
                {
                    "source_key": source.key,
                    "projection": {"mode": self.mode, "max_characters": self.share},
                    "route_ids": [route.id for route in source.routes],
                    "action_ids": [action.id for action in source.actions],
                }
                for source in chosen
            ]
            return ViewSpec.model_validate(
                {
                    "strategy_type_id": "select-documents",
                    "sources": selections,
                    "explanation": "the documents Source, when available",
                }
            )

        strategy = define_memory_strategy(
            {
                "type_id": "select-documents",
                "package_name": "documents-tests",
                "supported_source_roles": ["narrative"],
                "max_sources": 1,
                "max_routes": 4,
                "max_actions": 4,
            },
            compose,
        )
        install_memory(ctx, strategies=[strategy])


class Harness:
    """A runner with the documents Source mounted as `docs` on a temporary data folder."""

    def __init__(self, runner: MemoryCompositionRunner, data_dir: Path) -> None:
        self.runner = runner
        self.data_dir = data_dir

    def strategy(self, mode: str = "routed", share: int = 200) -> SelectDocuments:
        return SelectDocuments(mode, share)

    async def mount(self, mode: str = "routed", share: int = 200, **config: Any) -> None:
        await self.runner.mount(
            documents, instance_id="docs", config={"data_dir": str(self.data_dir), **config}
        )
        await self.runner.mount(SelectDocuments(mode, share), instance_id="select")

    async def turn(self, workspace: str | None = "w1", **scope: str) -> RunnerTurn:
        if workspace is not None:
            scope["workspace"] = workspace
        return await self.runner.begin_turn({"scope": scope})

    async def create(self, title: str, body: str, workspace: str = "w1") -> MutationReceipt:
        turn = await self.turn(workspace)
        try:
            return await turn.execute_action(f"{KEY}/create", {"title": title, "body": body}, allow)
        finally:
            await turn.release()

    async def search(
        self, query: str, workspace: str = "w1", limit: int = 20, **limits: int
    ) -> Evidence:
        turn = await self.turn(workspace)
        try:
            return await turn.execute_route(
                f"{KEY}/search", {"query": query, "limit": limit}, limits=limits or None
            )
        finally:
            await turn.release()

    def client(self, workspace: str = "w1", **scope: str) -> ManagementClient:
        return self.runner.management_client(KEY, {"workspace": workspace, **scope})

    async def listed(self, workspace: str = "w1") -> list[Mapping[str, Any]]:
        output = await self.client(workspace).read("list", {"limit": 1_000})
        return list(output["documents"])

    def folder(self, workspace: str = "w1") -> Path:
        partition = partition_name(Scope(workspace=workspace))
        assert partition is not None
        return self.data_dir / "sources" / "documents" / "docs" / "workspaces" / partition


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with MemoryCompositionRunner() as runner:
        yield Harness(runner, tmp_path / "data")


@pytest.fixture
async def mounted(harness: Harness) -> Harness:
    await harness.mount()
    return harness


@pytest.fixture
async def hurried(tmp_path: Path) -> AsyncIterator[Harness]:
    """A mounted harness whose host gives each Source read 2 s instead of the default 10 s."""
    async with MemoryCompositionRunner(source_timeout=2.0) as runner:
        harness = Harness(runner, tmp_path / "data")
        await harness.mount()
        yield harness
