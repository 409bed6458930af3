"""The notes example served over the remote plugin protocol (run by the plugin's run.command).

Notes kept per user live under `NOTES_DATA_DIR`, or a fresh temporary folder.
"""

from __future__ import annotations

import os
import tempfile

from mnemon_example_notes import NOTES_SOURCE
from mnemon_remote import serve

if __name__ == "__main__":
    if os.environ.get("NOTES_PID_FILE"):  # tests that kill the plugin learn its process id
        with open(os.environ["NOTES_PID_FILE"], "w", encoding="utf-8") as pid_file:
            pid_file.write(str(os.getpid()))
    data_dir = os.environ.get("NOTES_DATA_DIR") or tempfile.mkdtemp(prefix="notes-plugin-")
    serve(NOTES_SOURCE, os.environ["MNEMON_PLUGIN_MANIFEST"], data_dir=data_dir)
