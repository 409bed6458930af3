"""What this package registers with mnemon's commands by entry point.

`mnemon.contract_runners`: the Quivr-compat runner behind `mnemon plugin inspect|test|dev`;
`mnemon.scaffolds`: `mnemon new quivr-ranker NAME`, a stdlib retrieval plugin from the real
files in `scaffolds/quivr-ranker/`, certified by `mnemon plugin test`.
"""

from __future__ import annotations

from mnemon_remote import TemplateScaffold

from ._contract import MANIFEST_NAME, ContractRunner, certify_plugin, inspect_plugin
from ._develop import open_development

__all__ = ["contract_runner", "quivr_ranker_scaffold"]

#: `mnemon plugin inspect|test|dev` on a Quivr manifest: mnemon-remote's command finds it
contract_runner = ContractRunner(
    MANIFEST_NAME, "mnemon-strategy-quivr", inspect_plugin, certify_plugin, open_development
)

#: `mnemon new quivr-ranker NAME`
quivr_ranker_scaffold = TemplateScaffold(
    summary=(
        "A Quivr retrieval plugin in Python's standard library: keyword candidates, ranked by "
        "the query's words; signed requests verified"
    ),
    package="mnemon_strategy_quivr",
    kind="quivr-ranker",
    next_steps=(
        "cd {folder}",
        "mnemon plugin dev --fixture fixtures/tea.json .",
        "mnemon plugin test .",
    ),
)
