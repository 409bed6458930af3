"""Storage primitives for Sources that keep files: private, atomic, locked, never fooled by links.

Every first-party Source that writes files uses these, and a third-party Source gets them for
free:

- `private_folder(path)` makes a folder (and the parents it has to make) mode 0700 whatever
  the umask, and tightens an existing one.
- `open_regular(path, flags)` opens a regular file without following a link or waiting on a
  FIFO; a symbolic link, FIFO, socket, device or folder planted where a file belongs is refused
  (`SourceError` code `unsafe-path`). Use it for files a user placed (their mode is left alone).
- `open_private(path, flags)` does the same for a store file and makes it 0600.
- `write_atomically(path, data)` replaces a file with new bytes in one step: a private
  temporary file in the same folder, fsync, rename, fsync of the folder. Readers see the old
  bytes or the new ones, never a mix, even if the process is killed. `temporary_path(path)`
  names such a temporary for a file another library writes (a database being rebuilt).
- `remove_leftovers(path)` deletes the temporaries a writer killed inside `write_atomically`
  left beside `path` (and only those); `remove_leftovers_in(folder, names)` does it for every
  file of a folder. Call them while holding the lock.
- `hold_lock(path, timeout)` holds a cross-process lock on a lock file (portalocker: works on
  every platform Python supports), exclusive or `shared`, and fails as `SourceError` code
  `timeout` when another writer keeps it longer than `timeout` seconds.
- `switch_to_wal(connection, timeout)` puts an SQLite database in WAL mode, waiting for
  another process that holds the file (SQLite refuses the switch at once then).

Everything here blocks: call it from a worker thread (`mnemon.sdk.guarded_call`). The lock needs
the `portalocker` package, which the `storage` extra of the core distribution installs.
"""

from .._storage import PRIVATE_FILE_MODE as PRIVATE_FILE_MODE
from .._storage import PRIVATE_FOLDER_MODE as PRIVATE_FOLDER_MODE
from .._storage import hold_lock as hold_lock
from .._storage import open_private as open_private
from .._storage import open_regular as open_regular
from .._storage import private_folder as private_folder
from .._storage import remove_leftovers as remove_leftovers
from .._storage import remove_leftovers_in as remove_leftovers_in
from .._storage import switch_to_wal as switch_to_wal
from .._storage import temporary_path as temporary_path
from .._storage import tighten_file as tighten_file
from .._storage import write_atomically as write_atomically

__all__ = [
    "PRIVATE_FILE_MODE",
    "PRIVATE_FOLDER_MODE",
    "hold_lock",
    "open_private",
    "open_regular",
    "private_folder",
    "remove_leftovers",
    "remove_leftovers_in",
    "switch_to_wal",
    "temporary_path",
    "tighten_file",
    "write_atomically",
]

# tracebacks and reprs name the public module, where callers import these from
for _export in (
    hold_lock,
    open_private,
    open_regular,
    private_folder,
    remove_leftovers,
    remove_leftovers_in,
    switch_to_wal,
    temporary_path,
    tighten_file,
    write_atomically,
):
    _export.__module__ = __name__
del _export
