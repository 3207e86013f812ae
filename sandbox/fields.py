"""The Graph ``fields`` parameter: ``id,caption,replies{id,text,from{id}}`` as a tree.

Requested fields that exist are returned; unknown ones are ignored (Meta would complain, but
the brief asks for a lenient reading) and modifiers like ``.limit(5)`` are accepted and
dropped.
"""

from __future__ import annotations

import re

from sandbox.errors import invalid_param

FieldTree = dict[str, "FieldTree | None"]

_MODIFIER = re.compile(r"\.[a-z_]+\([^)]*\)")


def parse_fields(raw: str | None, default: str) -> FieldTree:
    text = _MODIFIER.sub("", raw if raw and raw.strip() else default)
    tree, rest = _parse(text, 0)
    if rest != len(text):
        raise invalid_param(f"Syntax error in fields: unexpected '}}' at {rest}")
    return tree


def _parse(text: str, pos: int) -> tuple[FieldTree, int]:
    tree: FieldTree = {}
    name = ""
    while pos < len(text):
        char = text[pos]
        if char == ",":
            if name.strip():
                tree.setdefault(name.strip(), None)
            name = ""
            pos += 1
        elif char == "{":
            sub, pos = _parse(text, pos + 1)
            if pos >= len(text) or text[pos] != "}":
                raise invalid_param("Syntax error in fields: missing '}'")
            if not name.strip():
                raise invalid_param("Syntax error in fields: '{' without a field name")
            tree[name.strip()] = sub
            name = ""
            pos += 1
        elif char == "}":
            break
        else:
            name += char
            pos += 1
    if name.strip():
        tree.setdefault(name.strip(), None)
    return tree, pos
