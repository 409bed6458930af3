"""The notes example served over the remote plugin protocol (run by the plugin's run.command).

Notes kept per user live under `NOTES_DATA_DIR`, or a fresh temporary folder.
"""

from __future__ import annotations

import os
import tempfile

from mnemon_example_notes import NOTES_SOURCE
from mnemon_remote import serve

if __name__ == "__main__":
    data_dir = os.environ.get("NOTES_DATA_DIR") or tempfile.mkdtemp(prefix="notes-plugin-")
    serve(NOTES_SOURCE, os.environ["MNEMON_PLUGIN_MANIFEST"], data_dir=data_dir)
