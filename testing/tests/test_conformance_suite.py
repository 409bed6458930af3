"""The Source conformance suite: a correct Source passes, each defect is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from journal import JournalPlugin, journal_config, seed_journal

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
        (defective("live_reads"), "test_routes_read_only_what_their_grant_pinned", "must read only what its read grant pinned"),
        (defective("blocking"), "test_facts_and_project_never_block_the_event_loop", "must not block the event loop.*detected"),
        (defective("shared_snapshot"), "test_concurrent_scopes_never_share_a_snapshot", "never see another scope's data"),
        (defective("shows_file_name"), "test_no_storage_path_or_file_name_in_the_view_or_wake", r"must not show storage paths.*\.json"),
        (defective("shows_path"), "test_no_storage_path_or_file_name_in_the_view_or_wake", "must not show storage paths"),
        (defective("writes_on_read"), "test_facts_and_project_write_nothing", "must not write.*last-read.json"),
        (defective("creates_on_read"), "test_facts_and_project_write_nothing", "must not write.*created sources/journal/subject/seen-"),
        (defective("counts_reads"), "test_facts_and_project_write_nothing", "must not change the Source's state"),
        (defective("caches_snapshot"), "test_concurrent_scopes_never_share_a_snapshot", r"project\(\) in scope .* must show only that scope's data, but called after facts\(\) of scope"),
        (defective("caches_revision"), "test_concurrent_scopes_never_share_a_snapshot", r"project\(\) in scope .* must pin the revision its own facts\(\) reported .* it returned the revision facts\(\) reported for scope"),
        (defective("claims_workspace"), "test_each_declared_partition_key_is_needed", r"declares partition_keys \['user_id', 'workspace'\], so in scope \{'user_id': 'u1'\} \(without workspace\)"),
    ],
    ids=["scope-leak", "shared-instances", "secret-leak", "volatile", "lost-writes", "overflow", "lax-input",
         "tenant-ignored", "tenant-fallback", "shared-agent-notes", "live-reads", "blocking", "shared-snapshot",
         "file-name-shown", "path-shown", "writes-on-read", "creates-on-read", "state-on-read",
         "cached-snapshot", "cached-revision", "claimed-partition-key"],
)  # fmt: skip
async def test_each_defect_fails_its_check(
    suite: JournalSuite, check: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match=message) as caught:
        await getattr(suite, check)(tmp_path)
    # the message states what the Source must do, not only what went wrong
    assert "must" in str(caught.value)


async def test_a_source_without_agent_private_data_skips_that_check_with_its_reason(
    tmp_path: Path,
) -> None:
    suite = type("NoAgentData", (JournalSuite,), {"write_for_agent": lambda self, marker: None})()
    with pytest.raises(pytest.skip.Exception, match="keeps no agent-private data"):
        await suite.test_agent_private_data_is_partitioned_by_agent(tmp_path)


class TestReadMostlyJournal(JournalSuite):
    """A Source without a generic write: markers are seeded into its files instead."""

    def write(self, marker: str) -> None:  # type: ignore[override]
        return None

    def write_for_agent(self, marker: str) -> None:  # type: ignore[override]
        return None

    async def seed(self, directory: Path, scope: Any, marker: str) -> None:
        seed_journal(directory, "subject", dict(scope), marker)


@pytest.mark.parametrize(
    ("overrides", "check", "reason"),
    [
        ({"secrets": {}}, "test_secrets_never_appear", "takes no secrets"),
        ({"unavailable_scope": None}, "test_a_scope_missing_its_ids_is_unavailable", "unavailable_scope is None"),
        ({"manage_write": lambda self, marker: None}, "test_stale_expected_revisions_are_rejected", "no management write"),
        ({"query": lambda self, marker: None}, "test_routes_read_only_what_their_grant_pinned", "query\\(\\) returns None"),
        ({"invalid_writes": ()}, "test_bad_inputs_get_a_clear_error_and_write_nothing", "invalid_writes is empty"),
        ({"write": lambda self, marker: None}, "test_concurrent_writers_lose_nothing", "no generic write"),
        ({"write": lambda self, marker: None}, "test_bad_inputs_get_a_clear_error_and_write_nothing", "no generic write"),
        ({"shared_data_reason": "entries over one named file share it"}, "test_two_instances_are_isolated", "over one named file"),
    ],
    ids=["no-secrets", "no-unavailable-scope", "no-manage-write", "no-query", "no-invalid-writes",
         "no-write-concurrency", "no-write-bad-inputs", "shared-file"],
)  # fmt: skip
async def test_a_check_that_does_not_apply_is_skipped_with_its_reason(
    overrides: dict[str, Any], check: str, reason: str, tmp_path: Path
) -> None:
    suite = type("Partial", (JournalSuite,), overrides)()
    with pytest.raises(pytest.skip.Exception, match=reason):
        await getattr(suite, check)(tmp_path)


async def test_without_write_or_seed_the_suite_says_which_hook_is_missing(tmp_path: Path) -> None:
    suite = type("NoWay", (JournalSuite,), {"write": lambda self, marker: None})()
    with pytest.raises(NotImplementedError, match=r"needs write\(\) or seed\(\)"):
        await suite.test_scope_isolation_on_every_path(tmp_path)


async def test_a_seeded_marker_that_leaks_is_caught(tmp_path: Path) -> None:
    suite = type("SeededLeak", (TestReadMostlyJournal,), {"defects": ("shared_snapshot",)})()
    with pytest.raises(AssertionError, match="never see another scope's data"):
        await suite.test_concurrent_scopes_never_share_a_snapshot(tmp_path)
