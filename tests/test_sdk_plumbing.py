"""The plumbing every Source needs, in the public SDK: configuration, text, partitions, calls."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

import mnemon.sdk
from mnemon import DefinitionError, RevisionConflict, Scope, SourceError, SourceProvenance
from mnemon.sdk import (
    ConfigPath,
    Configuration,
    ScopePartition,
    SourceInit,
    check_memory_text,
    guarded_call,
    memory_text_schema,
    read_configuration,
    scope_partition,
)

# ------------------------------------------------------------------ configuration


class NotesConfiguration(Configuration):
    path: ConfigPath
    data_dir: ConfigPath | None = None
    limit: int = 10
    token: SecretStr | None = None


def init_with(configuration: dict[str, Any], config_dir: str | None = "/srv/profile") -> SourceInit:
    return SourceInit(
        instance_key="source:notes",
        provenance=SourceProvenance(entry_id="notes", package_name="p", type_id="notes"),
        configuration=configuration,
        config_dir=config_dir,
    )


def test_relative_paths_are_taken_from_the_profiles_folder() -> None:
    read = read_configuration(
        NotesConfiguration,
        init_with({"path": "notes/today.md", "data_dir": "/abs"}),
        subject="notes",
    )
    assert read.path == Path("/srv/profile/notes/today.md")
    assert read.data_dir == Path("/abs")
    home = read_configuration(NotesConfiguration, init_with({"path": "~/n.md"}), subject="notes")
    assert home.path == Path("~/n.md").expanduser()


def test_a_relative_path_without_a_profile_folder_names_the_key_not_the_value() -> None:
    with pytest.raises(DefinitionError) as caught:
        read_configuration(
            NotesConfiguration,
            init_with({"path": "tok_SECRET/x"}, config_dir=None),
            subject="notes",
        )
    assert str(caught.value).startswith("notes configuration.path: must be an absolute path")
    assert "SECRET" not in str(caught.value)


def test_unknown_keys_are_refused_with_a_suggestion() -> None:
    with pytest.raises(DefinitionError) as caught:
        read_configuration(
            NotesConfiguration, init_with({"path": "/a", "limt": 3}), subject="notes"
        )
    assert str(caught.value) == "notes configuration.limt: unknown key; did you mean 'limit'?"


def test_errors_name_every_key_at_fault_and_never_quote_values() -> None:
    with pytest.raises(DefinitionError) as caught:
        read_configuration(
            NotesConfiguration,
            init_with({"limit": "tok-SECRET-limit", "token": 12345}),
            subject="notes",
        )
    message = str(caught.value)
    assert "notes configuration.path: required" in message
    assert "notes configuration.limit:" in message
    assert "notes configuration.token:" in message
    assert "SECRET" not in message
    assert "12345" not in message


def test_a_configuration_mapping_reads_like_a_source_init() -> None:
    # what an embedder's factory or a plugin's apply() gets: the mapping and, maybe, a folder
    read = read_configuration(
        NotesConfiguration, {"path": "n.md", "limit": 3}, subject="notes", config_dir="/srv/p"
    )
    assert (read.path, read.limit) == (Path("/srv/p/n.md"), 3)
    with pytest.raises(DefinitionError) as caught:
        read_configuration(NotesConfiguration, {"path": "tok_SECRET.md"}, subject="notes")
    assert str(caught.value).startswith("notes configuration.path: must be an absolute path")
    assert "SECRET" not in str(caught.value)
    with pytest.raises(DefinitionError, match=r"^notes configuration\.limt: unknown key"):
        read_configuration(NotesConfiguration, {"path": "/a", "limt": 3}, subject="notes")
    with pytest.raises(DefinitionError, match=r"^notes configuration: must be a table"):
        read_configuration(NotesConfiguration, ["path", "/a"], subject="notes")  # type: ignore[arg-type]


def test_secrets_are_masked_in_every_repr() -> None:
    read = read_configuration(
        NotesConfiguration, init_with({"path": "/a", "token": "tok-SECRET-9"}), subject="notes"
    )
    assert read.token is not None
    assert read.token.get_secret_value() == "tok-SECRET-9"
    assert "tok-SECRET-9" not in repr(read)
    assert "tok-SECRET-9" not in str(read)


# ------------------------------------------------------------------ memory text

REFUSED = {
    "blank": ("   \n\t", "must not be blank"),
    "too-long": ("x" * 11, "at most 10 characters"),
    "nul": ("a\x00b", "contains a control character (U+0000)"),
    "bare-cr": ("a\rb", "contains a control character (U+000D)"),
    "escape": ("a\x1b]52;c;x\x07", "contains a control character (U+001B)"),
    "del": ("a\x7fb", "contains a control character (U+007F)"),
    "nel": ("a\x85b", "contains a control character (U+0085)"),
    "bidi": ("a\u202eb", "contains a bidi control (U+202E)"),
    "isolate": ("a\u2066b", "contains a bidi control (U+2066)"),
    "line-separator": ("a\u2028b", "contains a line separator (U+2028)"),
    "paragraph-separator": ("a\u2029b", "contains a paragraph separator (U+2029)"),
}


@pytest.mark.parametrize(("text", "problem"), REFUSED.values(), ids=REFUSED.keys())
def test_invalid_memory_text_is_refused_naming_the_rule(text: str, problem: str) -> None:
    with pytest.raises(SourceError) as caught:
        check_memory_text(text, max_characters=10, field="remember.text")
    assert caught.value.code == "invalid_payload"
    assert str(caught.value) == f"remember.text: {problem}"
    assert caught.value.nothing_written
    # the input schema says the same, so the core refuses it before the Source is asked
    schema = {"type": "object", "properties": {"t": memory_text_schema(10)}}
    assert not jsonschema.Draft202012Validator(schema).is_valid({"t": text})


@pytest.mark.parametrize("text", ["plain", "two\nlines\tand a tab", "é 🙂 λ", "👩‍👩‍👧 joined"])
def test_valid_memory_text_passes_both_checks(text: str) -> None:
    assert check_memory_text(text, max_characters=40) == text
    schema = {"type": "object", "properties": {"t": memory_text_schema(40)}}
    assert jsonschema.Draft202012Validator(schema).is_valid({"t": text})


def test_single_line_text_refuses_newlines_and_tabs() -> None:
    for text in ("a\nb", "a\tb"):
        with pytest.raises(SourceError, match=r"title: contains a control character"):
            check_memory_text(text, max_characters=10, single_line=True, field="title")
        schema = {"type": "object", "properties": {"t": memory_text_schema(10, single_line=True)}}
        assert not jsonschema.Draft202012Validator(schema).is_valid({"t": text})


def _old_rule(text: str, single_line: bool) -> str | None:
    """The rule as it was written before its fast path: the problem found, or None."""
    from mnemon._text import _FORBIDDEN_IN_LINE, _FORBIDDEN_IN_TEXT, _SURROGATE

    if not text.strip():
        return "blank"
    if len(text) > 12:
        return "long"
    forbidden = _FORBIDDEN_IN_LINE if single_line else _FORBIDDEN_IN_TEXT
    found = forbidden.search(text) or _SURROGATE.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


@given(
    st.text(
        alphabet=st.sampled_from(
            list(" ab~\t\n\r\x00\x1c\x7f\x85\xa0é\u2028\u200e\u3000\ud800"),
        ),
        max_size=14,
    ),
    st.booleans(),
)
def test_memory_text_is_judged_as_by_the_rule_as_first_written(
    text: str, single_line: bool
) -> None:
    # the printable-ASCII fast path and the blank check without a copy decide as before
    expected = _old_rule(text, single_line)
    try:
        assert check_memory_text(text, max_characters=12, single_line=single_line) == text
    except SourceError as exc:
        message = str(exc)
        assert expected is not None, message
        if expected == "blank":
            assert message == "text: must not be blank"
        elif expected == "long":
            assert message == "text: at most 12 characters"
        else:
            assert message.endswith(f"({expected})")
    else:
        assert expected is None


# ------------------------------------------------------------------ partitions


def test_the_tenant_always_partitions_and_missing_ids_have_no_partition() -> None:
    plain = scope_partition(Scope(user_id="ada"), ["user_id"])
    acme = scope_partition(Scope(user_id="ada", tenant_id="acme"), ["user_id"])
    globex = scope_partition(Scope(user_id="ada", tenant_id="globex"), ["user_id"])
    assert isinstance(plain, ScopePartition)
    assert plain is not None
    assert acme is not None
    assert globex is not None
    assert len({plain.key, acme.key, globex.key}) == 3
    assert dict(acme.values) == {"tenant_id": "acme", "user_id": "ada"}
    assert scope_partition(Scope(tenant_id="acme"), ["user_id"]) is None
    # the session is not a partition key here, so it does not split the data
    assert scope_partition(Scope(user_id="ada", session_id="s1"), ["user_id"]) == plain


def test_optional_ids_join_only_when_present() -> None:
    shared = scope_partition(Scope(user_id="ada"), ["user_id"], when_present=["agent_id"])
    planner = scope_partition(
        Scope(user_id="ada", agent_id="planner"), ["user_id"], when_present=["agent_id"]
    )
    coder = scope_partition(
        Scope(user_id="ada", agent_id="coder"), ["user_id"], when_present=["agent_id"]
    )
    assert shared is not None
    assert planner is not None
    assert coder is not None
    assert len({shared.key, planner.key, coder.key}) == 3
    assert planner.folder_name().startswith("p-")
    assert len(planner.folder_name()) == 34


def test_keys_are_injective_over_which_ids_are_present() -> None:
    # the same value under two different ids is two partitions
    by_user = scope_partition(Scope(user_id="x"), ["user_id"])
    by_workspace = scope_partition(Scope(workspace="x"), ["workspace"])
    assert by_user is not None
    assert by_workspace is not None
    assert by_user.key != by_workspace.key


def test_an_unknown_scope_id_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="'team_id' is not one of"):
        scope_partition(Scope(user_id="ada"), ["team_id"])


# ------------------------------------------------------------------ guarded calls


async def test_a_blocking_call_runs_off_the_event_loop() -> None:
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.001)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        result = await guarded_call(time.sleep, 0.05, subject="the nap")
        group.cancel_scope.cancel()
    assert result is None
    assert ticks > 5  # the loop kept running while the thread slept


async def test_timeouts_set_abandon_and_become_the_timeout_code() -> None:
    abandon = threading.Event()
    release = threading.Event()
    with pytest.raises(SourceError) as caught:
        await guarded_call(
            release.wait, 5, subject="the store write", timeout=0.02, abandon=abandon
        )
    release.set()
    assert caught.value.code == "timeout"
    assert caught.value.retryable
    assert str(caught.value) == "the store write did not finish in time"
    assert abandon.is_set()


async def test_cancellation_sets_abandon_and_propagates() -> None:
    abandon = threading.Event()
    release = threading.Event()
    with anyio.move_on_after(0.02) as scope:
        await guarded_call(release.wait, 5, subject="the store write", abandon=abandon)
    release.set()
    assert scope.cancelled_caught
    assert abandon.is_set()


async def test_failures_map_onto_the_taxonomy_without_their_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    def raising(error: BaseException) -> None:
        raise error

    cases = [
        (PermissionError("denied /srv/tok-SECRET"), "forbidden", "access"),
        (OSError("disk full at /srv/tok-SECRET"), "provider_error", "transient"),
        (ValueError("bad tok-SECRET"), "provider_error", "transient"),
        (SourceError("invalid_payload", "the Source's own words"), "invalid_payload", "terminal"),
    ]
    for error, code, kind in cases:
        with pytest.raises(SourceError) as caught:
            await guarded_call(raising, error, subject="the index read")
        assert (caught.value.code, caught.value.kind) == (code, kind)
        if code != "invalid_payload":
            assert "SECRET" not in str(caught.value)
    for record in caplog.records:
        if record.exc_info:
            assert record.levelno == logging.DEBUG
            assert record.name == "mnemon.sources"
    assert any(record.exc_info for record in caplog.records)


async def test_a_coroutine_function_is_awaited_under_the_same_limit_and_mapping() -> None:
    async def answer(value: int) -> int:
        await anyio.lowlevel.checkpoint()
        return value * 2

    async def stall() -> None:
        await anyio.sleep(5)

    async def failing() -> None:
        raise ValueError("upstream said tok-SECRET")

    assert await guarded_call(answer, 21, subject="the client call") == 42
    abandon = threading.Event()
    with pytest.raises(SourceError) as late:
        await guarded_call(stall, subject="the client call", timeout=0.02, abandon=abandon)
    assert late.value.code == "timeout"
    assert abandon.is_set()
    with pytest.raises(SourceError) as failed:
        await guarded_call(failing, subject="the client call")
    assert (failed.value.code, str(failed.value)) == ("provider_error", "the client call failed")


async def test_a_revision_conflict_passes_through_as_it_is() -> None:
    # a fenced management write re-checks the revision under the Source's lock, in the thread
    def fenced() -> None:
        raise RevisionConflict("revision conflict: source:notes is at 'r2', not 'r1'")

    with pytest.raises(RevisionConflict, match="is at 'r2', not 'r1'"):
        await guarded_call(fenced, subject="the fenced write")


def test_a_path_that_is_not_text_is_named_in_plain_words() -> None:
    with pytest.raises(DefinitionError) as caught:
        read_configuration(NotesConfiguration, init_with({"path": 7}), subject="notes")
    assert str(caught.value) == "notes configuration.path: must be a path (a non-empty string)"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("a: &x [1, 2]\nb: [*x, *x]\n", "a YAML alias (*name) is not accepted"),
        ("v: " + "[" * 48 + "]" * 48 + "\n", "nests deeper than 48 levels"),
        ("v: " + "[" * 3_000 + "]" * 3_000 + "\n", "nests deeper than 48 levels"),
        ("key: [unclosed\nsecret: s3cr3t-text\n", "not valid YAML at line"),
    ],
    ids=["alias", "49-levels", "3000-deep", "syntax"],
)
def test_parse_yaml_refuses_what_would_blow_up_whoever_walks_the_value(
    text: str, rule: str
) -> None:
    with pytest.raises(mnemon.DefinitionError) as caught:
        mnemon.sdk.parse_yaml(text)
    assert rule in str(caught.value)
    assert "s3cr3t" not in str(caught.value)


def test_parse_yaml_reads_what_safe_load_reads() -> None:
    text = "id: x\nlist: [1, 2.5, true, null]\nanchor: &a plain\nnested: {k: [v]}\n"
    assert mnemon.sdk.parse_yaml(text) == yaml.safe_load(text)
    deepest = "v: " + "[" * 47 + "]" * 47  # the mapping and 47 lists: 48 levels
    assert mnemon.sdk.parse_yaml(deepest) == yaml.safe_load(deepest)


@pytest.mark.parametrize(
    ("value", "described"),
    [
        ({"name": "a", "extra": 1, "more": 2}, "unexpected property 'extra', 'more'"),
        ({}, "missing property 'name'"),
        ({"name": 7}, "must be string"),
        ({"name": "tok_SECRET_" + "x" * 50}, "fails maxLength 20"),
    ],
    ids=["unexpected", "missing", "type", "bound"],
)
def test_a_schema_error_is_described_by_property_and_rule_never_by_value(
    value: dict[str, object], described: str
) -> None:
    import jsonschema

    from mnemon.sdk import describe_schema_error

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}},
        "required": ["name"],
        "additionalProperties": False,
    }
    (error,) = jsonschema.Draft202012Validator(schema).iter_errors(value)
    assert describe_schema_error(error) == described
    assert "SECRET" not in describe_schema_error(error)
