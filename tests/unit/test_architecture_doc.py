"""docs/architecture.md stays true to the code: what it names exists, what it counts adds up,
and every anchor of it cited anywhere in the repository (the file's name, `#`, the anchor) is
one of its own.

A citation is a backticked repository path, optionally with the name it points at:
`app/delivery/send/claims.py:claim_private_reply`, `...:WebhookIntake.store` (a class's
method or attribute), `app/delivery/send/` (a folder).
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
TOPS = ("app", "worker", "sandbox", "bench", "tests", "templates", "migrations", "static", "docs")
CITATION = re.compile(r"`((?:%s)/[\w./-]*)(?::([\w.]+))?`" % "|".join(TOPS))  # noqa: UP031
ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')
CITED_ANCHOR = re.compile(r"docs/architecture\.md#([\w-]+)")


def doc_text() -> str:
    return DOC.read_text()


def citations(text: str) -> list[tuple[str, str | None]]:
    return [(path, name or None) for path, name in CITATION.findall(text)]


@cache
def module_names(path: Path) -> dict[str, set[str]]:
    """Names bound at module level, each with the names bound in its class body (if a class)."""
    tree = ast.parse(path.read_text())
    names: dict[str, set[str]] = {}
    for node in tree.body:
        for name in _bound(node):
            names[name] = set()
        if isinstance(node, ast.ClassDef):
            names[node.name] = {name for child in node.body for name in _bound(child)}
    return names


def _bound(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def problem(path: str, name: str | None) -> str | None:
    target = ROOT / path
    if not target.exists():
        return f"{path}: no such file or folder"
    if name is None:
        return None
    if target.suffix != ".py":
        return f"{path}:{name}: only Python modules define names"
    first, _, rest = name.partition(".")
    names = module_names(target)
    if first not in names:
        return f"{path}: defines no {first}"
    if rest and rest not in names[first]:
        return f"{path}: {first} has no {rest}"
    return None


def section(text: str, start: str, end: str) -> str:
    return text[text.index(f'<a id="{start}"></a>') : text.index(f'<a id="{end}"></a>')]


def files_in(text: str) -> set[str]:
    return {path for path, name in citations(text) if name is not None}


def stated_count(text: str, verb: str) -> int:
    found = re.search(rf"{verb} \*\*(\d+) files\*\*", text)
    assert found is not None, f"no '{verb} **N files**' sentence"
    return int(found.group(1))


def test_every_cited_file_and_name_exists() -> None:
    cited = citations(doc_text())
    assert len(cited) > 100, "the citation pattern found almost nothing: is it still right?"
    problems = sorted({p for path, name in cited if (p := problem(path, name)) is not None})
    assert problems == []


def test_the_check_catches_a_wrong_name() -> None:
    assert problem("app/delivery/send/claims.py", "claim_private_reply") is None
    assert problem("app/delivery/intake/webhook_writer.py", "WebhookIntake.store") is None
    assert problem("app/delivery/send/claims.py", "claim_everything") is not None
    assert problem("app/delivery/intake/webhook_writer.py", "WebhookIntake.flush") is not None
    assert problem("app/delivery/claims.py", None) is not None


def test_the_comment_path_counts_its_files() -> None:
    text = doc_text()
    to_record = section(text, "comment-path", "comment-path-recovery")
    with_recovery = section(text, "comment-path", "other-triggers")
    assert len(files_in(to_record)) == stated_count(to_record, "cross")
    assert len(files_in(with_recovery)) == stated_count(with_recovery, "crosses")


def test_anchors_are_unique_and_internal_links_resolve() -> None:
    text = doc_text()
    anchors = ANCHOR.findall(text)
    assert len(anchors) == len(set(anchors))
    missing = set(re.findall(r"\]\(#([\w-]+)\)", text)) - set(anchors)
    assert missing == set()


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    paths = [ROOT / name.decode() for name in listed if name]
    kinds = {".py", ".md", ".html", ".toml", ".cfg", ".ini", ".txt", ".yml", ".json", ""}
    return [p for p in paths if p.suffix in kinds and p.is_file()]


def test_citations_of_the_doc_name_its_anchors() -> None:
    anchors = set(ANCHOR.findall(doc_text()))
    files = tracked_text_files()
    assert ROOT / "pyproject.toml" in files
    dangling = [
        f"{path.relative_to(ROOT)}: #{anchor}"
        for path in files
        for anchor in sorted(set(CITED_ANCHOR.findall(path.read_text(errors="replace"))))
        if anchor not in anchors
    ]
    assert dangling == []
