"""Field docstrings: the string written under a model's field is its description.

pydantic can read them itself (`use_attribute_docstrings`), but it tokenizes and parses each
class's source on its own, which made up a fifth of `import mnemon` and so of every `mnemon`
command's start. Here each module's source is parsed once, and a model's fields get their
descriptions before its schema is built (the models defer their build to first use).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["describe_fields"]


@dataclass(frozen=True)
class _Class:
    name: str
    first: int  # its first line, decorators included
    last: int
    docstrings: dict[str, str]


# per source file: its text when parsed, and its classes (nested ones too)
_parsed: dict[str, tuple[str, tuple[_Class, ...]]] = {}


def describe_fields(model: Any) -> None:
    """Give each field of `model` without a description the docstring written under it.

    Called from `__pydantic_init_subclass__`: a model whose build is deferred (as mnemon's
    bases ask) builds its schema with them later; one already built (a subclass that asked
    otherwise) is built again. A model whose source cannot be read keeps its fields as they are.
    """
    docstrings = _docstrings(model)
    described = False
    for name, field in model.model_fields.items():
        if field.description is None and name in docstrings:
            field.description = docstrings[name]
            described = True
    if described and model.__pydantic_complete__:
        model.model_rebuild(force=True)


def _docstrings(model: type) -> dict[str, str]:
    module = sys.modules.get(model.__module__)
    filename = getattr(module, "__file__", None)
    if module is None or not filename:
        return {}
    source = "".join(linecache.getlines(filename, module.__dict__))
    cached = _parsed.get(filename)
    if cached is None or cached[0] != source:
        try:
            cached = (source, _classes(ast.parse(source)))
        except (SyntaxError, ValueError):
            return {}
        _parsed[filename] = cached
    named = [found for found in cached[1] if found.name == model.__name__]
    if len(named) > 1:
        # one name defined twice in a module: the one whose lines run the class statement
        line = _defining_line(module.__dict__)
        named = [found for found in named if found.first <= line <= found.last]
    return named[0].docstrings if len(named) == 1 else {}


def _classes(tree: ast.Module) -> tuple[_Class, ...]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            last = node.end_lineno or node.lineno
            found.append(_Class(node.name, first, last, _field_docstrings(node)))
    return tuple(found)


def _field_docstrings(node: ast.ClassDef) -> dict[str, str]:
    """`name: type` (with or without a value) followed at once by a string: that string."""
    docstrings = {}
    for statement, following in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docstrings[statement.target.id] = inspect.cleandoc(following.value.value)
    return docstrings


def _defining_line(namespace: dict[str, Any]) -> int:
    """The line being run in the frame of `namespace`'s module (its class statement)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals is not namespace:
        frame = frame.f_back  # type: ignore[assignment]
    return frame.f_lineno if frame is not None else -1
