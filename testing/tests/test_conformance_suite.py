"""The Source conformance suite: a correct Source passes, each defect is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from journal import JournalPlugin, journal_config

from mnemon_testing.conformance import SourceConformance


class JournalSuite(SourceConformance):
    plugin = JournalPlugin()
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {}
    secrets: ClassVar[dict[str, str]] = {"token": "journal-secret-6e1f"}
    invalid_writes = (("add", {"text": ""}), ("add", {"text": "x" * 501}), ("add", {}))
    defects: ClassVar[tuple[str, ...]] = ()

    def configure(self, directory: Path) -> dict[str, Any]:
        return journal_config(directory, *self.defects)

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "find", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "list", {}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def write_for_agent(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "note", {"text": marker}


class TestReferenceJournal(JournalSuite):
    """A correct Source passes every check."""


def defective(*defects: str, **overrides: Any) -> JournalSuite:
    suite = type("Defective", (JournalSuite,), {"defects": defects, **overrides})
    return suite()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("suite", "check", "message"),
    [
        (defective("leak_scope"), "test_scope_isolation_on_every_path", "is visible under"),
        (defective("shared_files"), "test_two_instances_are_isolated", "shows through 'two'"),
        (defective("leak_secret"), "test_secrets_never_appear", "configuration 'token' leaked"),
        (defective("volatile"), "test_durable_data_survives_unmount_and_remount", "did not survive"),
        (defective("racy"), "test_concurrent_writers_lose_nothing", "concurrent writes were lost"),
        (defective("overflow"), "test_projections_respect_max_characters_and_mode", "projection"),
        (defective(plugin=JournalPlugin(lax=True)), "test_bad_inputs_get_a_clear_error_and_write_nothing", "accepted the invalid input"),
        (defective("ignore_tenant"), "test_the_same_user_in_two_tenants_is_two_partitions", "conformance-acme.*apart"),
        (defective("ignore_tenant"), "test_no_tenant_and_a_tenant_are_two_partitions", "must keep scope"),
        (defective("shared_notes"), "test_agent_private_data_is_partitioned_by_agent", "conformance-planner.*apart"),
    ],
    ids=["scope-leak", "shared-instances", "secret-leak", "volatile", "lost-writes", "overflow", "lax-input",
         "tenant-ignored", "tenant-fallback", "shared-agent-notes"],
)  # fmt: skip
async def test_each_defect_fails_its_check(
    suite: JournalSuite, check: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match=message):
        await getattr(suite, check)(tmp_path)


async def test_a_source_without_agent_private_data_skips_that_check_with_its_reason(
    tmp_path: Path,
) -> None:
    suite = type("NoAgentData", (JournalSuite,), {"write_for_agent": lambda self, marker: None})()
    with pytest.raises(pytest.skip.Exception, match="keeps no agent-private data"):
        await suite.test_agent_private_data_is_partitioned_by_agent(tmp_path)
