"""The spaces Source passes the Source conformance suite (mnemon_testing).

For a `namespace-pinned-live-read` Source the revision names the namespace set (spaces,
their parents and writability), not the contents; the extra check below covers what makes
such a revision stale beyond the suite's own: content writes keep it, a changed
configuration replaces it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import mnemon_source_spaces as spaces
import pytest
from spaces_kit import SelectSpaces

from mnemon import RevisionConflict
from mnemon_testing import MemoryCompositionRunner
from mnemon_testing.conformance import SourceConformance

LONG = "x" * 8_001


class TestSpacesSource(SourceConformance):
    plugin = spaces
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: ClassVar[Mapping[str, Any]] = {}
    secrets: ClassVar[Mapping[str, str]] = {"provider_token": "spaces-secret-token-5c1f0e"}
    invalid_writes = (
        ("remember", {"text": ""}),
        ("remember", {"text": LONG}),
        ("remember", {"text": "   \n\t "}),
        ("remember", {"text": "nul \x00 inside"}),
        ("remember", {"text": "fine", "space": "nowhere"}),
        ("remember", {"text": "fine", "space": "archive"}),
        ("remember", {"text": "fine", "tags": ["t"] * 17}),
        ("remember", {"text": "fine", "unexpected": True}),
        ("forget", {"id": "0123456789abcdef~00000000000000000000"}),
    )

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {
            "data_dir": str(directory),
            "spaces": [
                {"name": "notes", "writable": True, "description": "What the user asked to keep"},
                {"name": "archive", "writable": False},
            ],
        }

    def write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "remember", {"text": f"The marker is {marker}.", "tags": ["conformance"]}

    def query(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "recall", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "list", {"space": "notes", "limit": 100}

    def manage_write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "remember", {"space": "notes", "text": f"Kept by a person: {marker}."}

    async def test_namespace_revisions_fence_writes(self, tmp_path: Path) -> None:
        """A fenced write names the namespace set it expects; any other one is refused."""
        first, second = self.scopes
        async with await self._runner(tmp_path) as runner:
            client = runner.client(first)
            mine = await client.revision()
            theirs = await runner.client(second).revision()
            assert mine
            assert theirs
            assert mine != theirs
            refused = f"refused-{uuid.uuid4().hex}"
            for revision in (theirs, "conformance-stale-revision"):
                with pytest.raises(RevisionConflict):
                    await client.mutate(
                        "remember",
                        {"space": "notes", "text": refused},
                        confirmed=True,
                        expected_revision=revision,
                    )
            # content writes leave the namespace set, and so the revision, as it was
            for text in ("first kept", "second kept"):
                await client.mutate(
                    "remember",
                    {"space": "notes", "text": text},
                    confirmed=True,
                    expected_revision=mine,
                )
            assert await client.revision() == mine
            listed = await client.read("list", {"space": "notes", "limit": 100})
            assert refused not in str(listed)
        # a changed configuration (notes made read-only) is another namespace set
        changed = MemoryCompositionRunner()
        try:
            config = dict(self.configure(tmp_path))
            config["spaces"] = [
                {"name": "notes", "writable": False},
                {"name": "archive", "writable": False},
            ]
            await changed.mount(spaces, instance_id="subject", config=config)
            await changed.mount(SelectSpaces(), instance_id="strategy")
            client = changed.management_client("source:subject", first)
            assert await client.revision() != mine
            with pytest.raises(RevisionConflict):
                await client.mutate(
                    "forget",
                    {"space": "notes", "id": "0123456789abcdef"},
                    confirmed=True,
                    expected_revision=mine,
                )
        finally:
            await changed.dispose()
