"""The templates need no inline code, so the Content-Security-Policy can forbid it: no inline
scripts or styles, no `on…=` handlers, no `hx-on`, no htmx trigger filters (htmx evaluates
those with `eval`, which the policy forbids too), no `javascript:` links."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
FORBIDDEN = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE),
    "inline style element": re.compile(r"<style\b", re.IGNORECASE),
    "style attribute": re.compile(r"<[a-z][^>]*\sstyle=[\"']", re.IGNORECASE),
    "event handler attribute": re.compile(r"<[a-z][^>]*\son[a-z]+=[\"']", re.IGNORECASE),
    "hx-on": re.compile(r"\shx-on[:-]", re.IGNORECASE),
    "htmx trigger filter": re.compile(r"hx-trigger=[\"'][^\"']*\["),
    "js: values": re.compile(r"hx-vals=[\"']\s*(js|javascript):", re.IGNORECASE),
    "javascript: link": re.compile(r"javascript:", re.IGNORECASE),
}


@pytest.mark.parametrize("template", sorted(TEMPLATES.rglob("*.html")), ids=str)
def test_no_inline_code(template: Path) -> None:
    text = template.read_text()
    found = [name for name, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert not found, f"{template.relative_to(TEMPLATES)}: {found}"


def test_htmx_runs_without_eval_and_without_injected_styles() -> None:
    base = (TEMPLATES / "base.html").read_text()
    assert '"allowEval":false' in base
    assert '"includeIndicatorStyles":false' in base
