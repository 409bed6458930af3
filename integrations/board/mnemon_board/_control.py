"""The board's hold on one profile: its file, the host serving it, and every change to both.

A change is an edit of `mnemon.toml` (`ProfileDocument`). It is checked as a profile, applied to
the running host as one atomic change (`MemoryHost.change`: one new generation; a turn in
flight keeps its View), and only then written to the file, atomically. When the host refuses
it, neither the host nor the file changed, and the refusal says why. Every applied change can
be undone while the file still reads as that change left it.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from mnemon import (
    DefinitionError,
    HostSettings,
    MemoryHost,
    MnemonError,
    Profile,
    ProfileEntry,
    discover_plugins,
    load_profile,
)
from mnemon.sdk.storage import open_private, temporary_path, write_atomically

from ._edits import EditError, ProfileDocument

__all__ = ["Applied", "Board", "ChangeRefused"]

# undo records kept: enough for a session at the board, bounded for a long-running one
_UNDO_LIMIT = 64


class ChangeRefused(Exception):
    """A change that was not made: the host and the file are as they were. Says why."""


@dataclass(frozen=True, slots=True)
class Applied:
    """One change made: what moved, the generation now serving, and how to undo it."""

    moved: tuple[str, ...]
    """What changed, one short line each (`documents: off`), for the toast."""
    undo: str | None
    """The token that undoes it (None when nothing changed)."""
    state: str
    """The host's state after it (`serving`, `incomplete`, ...)."""
    generation: str | None
    """The serving generation after it, or None."""


@dataclass(frozen=True, slots=True)
class _Undo:
    before: str
    after: str
    moved: tuple[str, ...]


@dataclass(slots=True)
class _Mounted:
    """What the board mounted for an entry: which plugin, with which configuration."""

    plugin: str
    config: str  # canonical JSON, so an equal configuration is not remounted


@dataclass(slots=True)
class Board:
    """The profile at `path` and the host serving it; made by `Board.open`."""

    path: Path
    host: MemoryHost
    text: str
    """The file's text as the board last read or wrote it."""
    profile: Profile
    problem: str | None = None
    """Why the file could not be applied (at start, or after an outside edit), or None."""
    _mounted: dict[str, _Mounted] = field(default_factory=dict)
    _lock: anyio.Lock = field(default_factory=anyio.Lock)
    _undo: dict[str, _Undo] = field(default_factory=dict)
    _discovery: Any = None  # what discover_plugins returned

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path) -> AsyncIterator[Board]:
        """Load the profile and serve it; a profile that cannot mount is kept, with why.

        The host starts with the profile's settings and observers; its entries are mounted as
        one change. When they cannot be, the board still opens (nothing mounted), so the
        person at it can switch off what fails.

        Raises:
            DefinitionError: the file is missing or is not a valid profile.
        """
        profile = load_profile(path)
        text = profile.path.read_text(encoding="utf-8")
        async with replace(profile, entries=()).open_host() as host:
            board = cls(path=profile.path, host=host, text=text, profile=profile)
            try:
                await board._sync(profile)
            except MnemonError as exc:
                board.problem = _one_line(exc)
            yield board

    # ------------------------------------------------------------------ reading

    def discovery(self) -> Any:
        """What `mnemon.discover_plugins` finds for this profile (read once; `rescan` again)."""
        if self._discovery is None:
            self._discovery = discover_plugins(project_dir=self.path.parent)
        return self._discovery

    def rescan(self) -> None:
        """Forget the discovered plugins, so the next page finds new ones."""
        self._discovery = None

    def mounted(self) -> set[str]:
        """The ids of the entries the host has mounted now."""
        return set(self._mounted)

    def load_plugin(self, entry: ProfileEntry) -> Any:
        """Import the plugin an entry names (for its declared node in the activation graph).

        Raises:
            MnemonError: it cannot be imported (the message names the entry, never its code's
                own words).
        """
        return entry.load_plugin(self.path, self.discovery())

    async def refresh(self) -> None:
        """Take up an edit made to the file outside the board, or say why it cannot be."""
        async with self._lock:
            try:
                text = await anyio.to_thread.run_sync(self._read)
            except OSError as exc:
                self.problem = f"{self.path.name} cannot be read ({type(exc).__name__})"
                return
            if text == self.text:
                return
            try:
                profile = self._checked(text)
                await self._sync(profile)
            except (ChangeRefused, MnemonError) as exc:
                self.problem = (
                    f"{self.path.name} was changed outside the board and cannot be applied: "
                    f"{_one_line(exc)}"
                )
                return
            self.text, self.profile, self.problem = text, profile, None
            self._discovery = None

    # ------------------------------------------------------------------ changing

    async def apply(
        self, edit: Callable[[ProfileDocument], None], moved: tuple[str, ...]
    ) -> Applied:
        """Edit the file with `edit`, apply the result to the host, then save it.

        Raises:
            ChangeRefused: the edit, the profile it makes or its mount was refused, or the file
                changed outside the board; nothing changed.
        """
        async with self._lock:
            await self._check_unchanged()
            try:
                document = ProfileDocument(self.text)
                edit(document)
            except EditError as exc:
                raise ChangeRefused(str(exc)) from None
            return await self._change_to(document.text(), moved)

    async def undo(self, token: str) -> Applied:
        """Put back the file and the host as they were before the change `token` names.

        Raises:
            ChangeRefused: the token is unknown, or the file has changed since that change.
        """
        async with self._lock:
            record = self._undo.get(token)
            if record is None:
                raise ChangeRefused("nothing to undo: that change is no longer remembered")
            await self._check_unchanged()
            if self.text != record.after:
                raise ChangeRefused(
                    "cannot undo: mnemon.toml has changed since (undo the later changes first)"
                )
            applied = await self._change_to(record.before, record.moved)
            self._undo.pop(token, None)
            return applied

    async def _check_unchanged(self) -> None:
        try:
            text = await anyio.to_thread.run_sync(self._read)
        except OSError as exc:
            raise ChangeRefused(f"{self.path.name} cannot be read ({type(exc).__name__})") from None
        if text != self.text:
            raise ChangeRefused(
                f"{self.path.name} was changed outside the board since this page was drawn: "
                "reload the page to take it up"
            )

    async def _change_to(self, text: str, moved: tuple[str, ...]) -> Applied:
        if text == self.text:
            return self._applied((), None)
        profile = self._checked(text)
        previous = self.profile
        try:
            await self._sync(profile)
        except MnemonError as exc:
            raise ChangeRefused(_one_line(exc)) from None
        try:
            await anyio.to_thread.run_sync(self._write, text)
        except (OSError, MnemonError) as exc:
            # the host serves what the file does not say: put the host back
            with suppress(MnemonError):
                await self._sync(previous)
            raise ChangeRefused(
                f"{self.path.name} could not be written ({type(exc).__name__}); nothing changed"
            ) from None
        token = secrets.token_urlsafe(16)
        self._undo[token] = _Undo(self.text, text, moved)
        while len(self._undo) > _UNDO_LIMIT:
            self._undo.pop(next(iter(self._undo)))
        self.text, self.profile, self.problem = text, profile, None
        self._discovery = None
        return self._applied(moved, token)

    def _applied(self, moved: tuple[str, ...], token: str | None) -> Applied:
        report = self.host.inspect()
        serving = report.get("serving") or {}
        return Applied(moved, token, str(report.get("state")), serving.get("generation_id"))

    # ------------------------------------------------------------------ the file

    def _read(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def _write(self, text: str) -> None:
        mode = self.path.stat().st_mode & 0o777
        write_atomically(self.path, text.encode("utf-8"))
        os.chmod(self.path, mode)  # the file keeps the permissions its owner gave it

    def _checked(self, text: str) -> Profile:
        """`text` read as a profile (beside the real one: relative paths mean the same).

        Raises:
            ChangeRefused: it is not a valid profile; the message names the key at fault.
        """
        temporary = temporary_path(self.path)
        try:
            descriptor = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(text.encode("utf-8"))
            profile = load_profile(temporary)
        except DefinitionError as exc:
            message = str(exc).replace(temporary.name, self.path.name)
            raise ChangeRefused(_one_line(message)) from None
        except OSError as exc:
            raise ChangeRefused(
                f"{self.path.name}: the change cannot be checked ({type(exc).__name__})"
            ) from None
        finally:
            with suppress(OSError):
                temporary.unlink()
        if profile.observers != self.profile.observers:
            raise ChangeRefused(
                f"{self.path.name}: [[observers]] changed; restart `mnemon board` to load them"
            )
        return replace(profile, path=self.path)

    # ------------------------------------------------------------------ the host

    async def _sync(self, profile: Profile) -> None:
        """Make the host serve `profile`: one atomic change of entries and settings.

        Raises:
            MnemonError: an entry cannot be imported or the host refused the change; the host
                is as it was.
        """
        wanted: dict[str, tuple[ProfileEntry, _Mounted, dict[str, Any]]] = {}
        for entry in profile.entries:
            if entry.enabled:
                config = profile.entry_config(entry)
                plugin = (
                    f"plugin:{entry.plugin}" if entry.plugin is not None else f"use:{entry.use}"
                )
                canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
                wanted[entry.id] = (entry, _Mounted(plugin, canonical), config)
        unmount = [
            entry_id
            for entry_id, mounted in self._mounted.items()
            if entry_id not in wanted or wanted[entry_id][1] != mounted
        ]
        changed = [
            entry_id
            for entry_id, (_, mounted, _) in wanted.items()
            if self._mounted.get(entry_id) != mounted
        ]
        discovery = discover_plugins(project_dir=profile.path.parent)
        mounts = [
            (
                wanted[entry_id][0].load_plugin(profile.path, discovery),
                entry_id,
                wanted[entry_id][2],
            )
            for entry_id in changed
        ]
        options = _settings_changed(self.host.settings, profile.settings)
        if unmount or mounts or options:
            await self.host.change(mounts, unmount=unmount, **options)
        self._mounted = {entry_id: mounted for entry_id, (_, mounted, _) in wanted.items()}


def _settings_changed(current: HostSettings, wanted: HostSettings) -> dict[str, Any]:
    return {
        name: getattr(wanted, name)
        for name in HostSettings.model_fields
        if getattr(wanted, name) != getattr(current, name)
    }


def _one_line(problem: object) -> str:
    return " ".join(str(problem).split())
