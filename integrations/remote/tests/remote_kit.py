"""What the remote plugin tests share."""

from __future__ import annotations

#: the caller secret the in-process apps of these tests are served with
TOKEN = "test-caller-secret-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
