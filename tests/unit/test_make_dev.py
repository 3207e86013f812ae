"""`make dev` on a machine whose usual ports are taken: the web and sandbox ports and Redis
come from `WEB_PORT`, `SANDBOX_PORT` and `REDIS_URL`, and the README says how, and how to run
the sandbox without make. Read from make's dry run (`make -n`), which starts nothing."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"WEB_PORT", "SANDBOX_PORT"}}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_make_dev_takes_its_ports_from_the_command_line() -> None:
    recipe = _dry_run("dev", "WEB_PORT=18080", "SANDBOX_PORT=18180")
    assert 'web_port="18080"' in recipe
    assert 'sandbox_port="18180"' in recipe
    # Every port the processes, the health wait and the printed URLs use comes from those.
    assert "--port $web_port" in recipe
    assert "--port $sandbox_port" in recipe
    assert "127.0.0.1:$web_port/health" in recipe
    assert not re.search(r"--port 8[01]00\b|:8000/health", recipe), recipe


def test_make_dev_defaults_to_8000_and_8100() -> None:
    recipe = _dry_run("dev")
    assert 'web_port="8000"' in recipe
    assert 'sandbox_port="8100"' in recipe


def test_the_readme_says_how_to_move_the_ports_and_run_the_sandbox_by_hand() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make dev WEB_PORT=8001 SANDBOX_PORT=8101" in readme
    assert "REDIS_URL=redis://127.0.0.1:6380/0 make dev" in readme
    without_docker = readme[readme.index("Without Docker") :]
    for setting in (
        "python -m sandbox",
        "SANDBOX_INSTAGRAM_APP_ID",
        "SANDBOX_INSTAGRAM_APP_SECRET",
        "SANDBOX_META_APP_SECRET",
        "SANDBOX_WEBHOOK_VERIFY_TOKEN",
        "GRAPH_API_BASE=http://127.0.0.1:8100/v25.0",
        "INSTAGRAM_OAUTH_BASE=http://127.0.0.1:8100",
    ):
        assert setting in without_docker, setting
