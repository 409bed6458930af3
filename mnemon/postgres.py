"""Moved to `mnemon.sdk.postgres`; this old name still imports it, with a warning."""

import sys
import warnings

from .sdk import postgres as _moved

warnings.warn(
    "mnemon.postgres moved to mnemon.sdk.postgres: import it from there "
    "(the old name goes in a later release)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
