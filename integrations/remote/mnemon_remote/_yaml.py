"""YAML for manifest files: PyYAML's safe loader without aliases, with bounded nesting.

An alias shares its anchor's value by reference, so a few lines of anchors expand exponentially
in whatever walks the value next (a schema check, a dump, a digest); the composer recurses once
per level, so deep nesting ends in RecursionError. Both are refused while the file is read.
The same loader is `mnemon_source_nexent._yaml`: plugins do not import each other and the core
does not depend on PyYAML; keep their code identical.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["MAX_YAML_NESTING", "YamlRefused", "load_manifest_yaml"]

# the JSON depth mnemon accepts: a deeper value could not cross into the core anyway
MAX_YAML_NESTING = 48


class YamlRefused(yaml.YAMLError):
    """The YAML uses an alias or nests too deeply; the message names the rule, never the text."""


class _ManifestLoader(yaml.SafeLoader):
    _nesting = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise YamlRefused("the manifest uses a YAML alias (*name); spell every value out")
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        if self._nesting >= MAX_YAML_NESTING:
            raise YamlRefused(f"the manifest nests deeper than {MAX_YAML_NESTING} levels")
        self._nesting += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1


def load_manifest_yaml(text: str) -> Any:
    """Parse one YAML document as safe_load does, refusing aliases and deep nesting.

    Raises:
        YamlRefused: an alias, or nesting deeper than `MAX_YAML_NESTING`.
        yaml.YAMLError: the text is not YAML.
    """
    loader = _ManifestLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
