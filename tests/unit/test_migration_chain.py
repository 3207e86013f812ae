"""The migrations form one line: each file's number is its revision, each revision is taken once,
and each one revises the one before it.

Parallel branches that each add "the next" migration land two files with the same revision or the
same parent; Alembic then refuses to upgrade (two heads). This catches it before the database does.
"""

from __future__ import annotations

import ast
from pathlib import Path

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _assigned(path: Path, name: str) -> str | None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            target: ast.expr = node.target
            value = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            assert isinstance(value, ast.Constant), f"{path.name}: {name} is not a literal"
            return None if value.value is None else str(value.value)
    raise AssertionError(f"{path.name} sets no {name}")


def test_the_migrations_are_one_numbered_line() -> None:
    files = sorted(VERSIONS.glob("[0-9]*.py"))
    assert files, "no migrations found"
    previous: str | None = None
    for path in files:
        revision = _assigned(path, "revision")
        number = path.name.split("_", 1)[0]
        assert revision == number, f"{path.name}: revision {revision!r}, file number {number}"
        assert _assigned(path, "down_revision") == previous, (
            f"{path.name} revises {_assigned(path, 'down_revision')!r}, not {previous!r}: "
            "renumber it after the newest migration on main"
        )
        previous = revision
