"""Moved to `mnemon.sdk.storage`; this old name still imports it, with a warning."""

import sys
import warnings

from .sdk import storage as _moved

warnings.warn(
    "mnemon.storage moved to mnemon.sdk.storage: import it from there "
    "(the old name goes in a later release)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
