"""YAML that a plugin hands the host (a manifest, a provider file), read without surprises.

An alias shares its anchor's value by reference, so a few lines of anchors expand
exponentially in whatever walks the value next (a schema check, a dump, a digest); the composer
recurses once per level, so deep nesting ends in RecursionError. Both are refused while the
text is read. PyYAML is imported only when YAML is read: the core does not depend on it, the
plugins that read YAML do.
"""

from __future__ import annotations

from typing import Any

from ._errors import DefinitionError
from ._json import MAX_JSON_DEPTH

__all__ = ["parse_yaml"]


def _loader(text: str) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        nesting = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            if self.check_event(yaml.AliasEvent):
                raise DefinitionError("a YAML alias (*name) is not accepted; spell each value out")
            if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
                return super().compose_node(parent, index)
            # the JSON depth mnemon accepts: a deeper value could not cross into the core anyway
            if self.nesting >= MAX_JSON_DEPTH:
                raise DefinitionError(f"the YAML nests deeper than {MAX_JSON_DEPTH} levels")
            self.nesting += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.nesting -= 1

    return Loader(text)


def parse_yaml(text: str) -> Any:
    """Parse one YAML document as PyYAML's `safe_load` does, refusing aliases and deep nesting.

    For files a plugin or a user hands the host: a YAML alias, or collections nested deeper
    than mnemon's JSON limit (48 levels), is refused before anything walks the value. Needs
    PyYAML, which the plugin that reads YAML brings.

    Raises:
        DefinitionError: the text is not YAML (the message gives the line and column), uses an
            alias or nests too deeply; the message names the rule, never the text.
    """
    try:
        import yaml
    except ModuleNotFoundError:
        raise DefinitionError("reading YAML needs PyYAML: pip install pyyaml") from None
    loader = _loader(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        raise DefinitionError(f"the text is not valid YAML{where}") from None
    except yaml.YAMLError:
        raise DefinitionError("the text is not valid YAML") from None
    finally:
        loader.dispose()
