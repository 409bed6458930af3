"""The `raven-backend` Source's configuration."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from mnemon.sdk import ConfigPath, Configuration

__all__ = ["RavenConfiguration"]


class RavenConfiguration(Configuration):
    """How one entry hosts one Raven backend."""

    backend: str = Field(min_length=1, max_length=300)
    """The factory: `module:make_backend`, or a `memory_backends` name of a discovered plugin."""
    track: Literal["user", "agent"] = "user"
    """Whose memory this entry serves: the scope's user, or its agent."""
    top_k: int = Field(default=10, ge=1, le=100, title="Results per recall")
    """Results per recall by default, and the most one recall may ask for."""
    backend_config: dict[str, Any] = Field(default_factory=dict, title="Backend configuration")
    """Handed to the factory as `ctx.config`, with the identity's `user_id` and `agent_id`."""
    on_failure: Literal["unavailable", "reject"] = "unavailable"
    """A backend that fails to import, to be made or to start: the Source is `unavailable`,
    or every turn it serves is rejected."""
    max_backends: int = Field(default=32, ge=1, le=10_000, title="Most backends kept")
    """The most identities whose backends stay made and started; the least recently used
    idle one beyond it is stopped."""
    raven_shim: bool = Field(default=True, title="Raven stand-ins")
    """Register stand-ins for Raven's modules (`raven.memory_engine`, `raven.plugin`) before
    the factory is imported, when Raven itself is not installed."""
    data_dir: ConfigPath | None = Field(default=None, title="Data folder")
    """Where the backend's workspace folder is made (default: the host's data folder)."""
