"""The Quivr-compat contract runner, as the `mnemon.contract_runners` entry point names it."""

from __future__ import annotations

from ._contract import MANIFEST_NAME, ContractRunner, certify_plugin, inspect_plugin
from ._develop import open_development

__all__ = ["contract_runner"]

#: `mnemon plugin inspect|test|dev` on a Quivr manifest: mnemon-remote's command finds it
contract_runner = ContractRunner(
    MANIFEST_NAME, "mnemon-strategy-quivr", inspect_plugin, certify_plugin, open_development
)
