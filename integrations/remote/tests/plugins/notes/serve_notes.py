"""The notes example served over the remote plugin protocol (run by the plugin's run.command).

The run convention gives it its caller secret and configuration (`data_dir`, or `path`); notes
kept per user live in the configured folder, else in a fresh temporary one. A first argument
names a file to write the process id to, for tests that kill the plugin.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from mnemon_example_notes import NOTES_SOURCE
from mnemon_remote import serve

if __name__ == "__main__":
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(str(os.getpid()), encoding="utf-8")
    data_dir = tempfile.mkdtemp(prefix="notes-plugin-")
    serve(NOTES_SOURCE, os.environ["MNEMON_PLUGIN_MANIFEST"], data_dir=data_dir)
