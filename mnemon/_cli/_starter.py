"""The starter profile `mnemon init` writes."""

from __future__ import annotations

__all__ = ["STARTER_PROFILE", "starter_profile"]


def starter_profile(data_dir: str = ".mnemon") -> str:
    """The starter profile text, keeping data under `data_dir` (relative to the file)."""
    return f"""\
# mnemon profile, written by `mnemon init`.
# Every enabled entry is mounted together, in one atomic change.
# Relative paths are taken from this file's folder.
data_dir = "{data_dir}"
source_timeout = 10.0

[strategy]
use = "layered"

# Resident working memory: facts about the user and the agent's own notes.
[[entries]]
id = "runtime"
use = "mnemon_source_runtime"

# Markdown documents of the workspace, searchable (SQLite FTS5). Needs --workspace.
[[entries]]
id = "documents"
use = "mnemon_source_documents"

# Durable long-term memory in named spaces, on the embedded SQLite provider.
[[entries]]
id = "spaces"
use = "mnemon_source_spaces"
[entries.config]
default_space = "personal"

[[entries.config.spaces]]
name = "personal"
writable = true
description = "What the user shared about themselves."

# decisions of one workspace stay in that workspace (when the scope names one)
[[entries.config.spaces]]
name = "project"
writable = true
partition_by = ["workspace"]
description = "Decisions and facts about the work."

[entries.config.provider]
type = "sqlite"

# The Strategy: working context resident, documents and long-term memory on request.
[[entries]]
id = "layered"
use = "mnemon_strategy_layered"

# View extensions ship disabled: set enabled = true to use one.
[[entries]]
id = "scoped"
use = "mnemon_strategy_scoped"
enabled = false

[[entries]]
id = "light-context"
use = "mnemon_strategy_light_context"
enabled = false

[[entries]]
id = "auto-capture"
use = "mnemon_strategy_auto_capture"
enabled = false
"""


STARTER_PROFILE = starter_profile()
