"""The vendored htmx is the 2.x file recorded in static/VENDORED.md, byte for byte."""

from __future__ import annotations

import hashlib
import re

from tests.support.infra import ROOT


def test_vendored_htmx_matches_its_recorded_version_and_hash() -> None:
    record = (ROOT / "static" / "VENDORED.md").read_text()
    row = re.search(r"`htmx\.min\.js` \| [^|]+\| ([0-9.]+) \| `([0-9a-f]{64})`", record)
    assert row is not None, "VENDORED.md has no htmx row"
    version, digest = row.groups()
    content = (ROOT / "static" / "htmx.min.js").read_bytes()
    assert hashlib.sha256(content).hexdigest() == digest
    assert version.startswith("2.")
    assert f'version:"{version}"'.encode() in content
