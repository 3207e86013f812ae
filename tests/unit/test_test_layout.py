"""Test modules that `make test` collects in one pytest run must have distinct file names.

pytest imports them by basename (rootdir mode, no packages), so two `test_x.py` under
`tests/unit` and `tests/integration` stop the whole run at collection.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ONE_RUN = ("unit", "integration", "fuzz")


def test_one_run_has_no_two_test_modules_of_the_same_name() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for folder in ONE_RUN:
        for path in (TESTS / folder).rglob("test_*.py"):
            seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert clashes == {}
