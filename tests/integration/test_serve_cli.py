"""`python -m app serve` takes its interface and port from HOST and PORT when no flag is given
(the Docker image and PaaS hosts set PORT), and refuses a malformed PORT in one line."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.processes import Service, free_port, run_cli, wait_until


def test_serve_listens_on_host_and_port_from_the_environment(
    test_env: dict[str, str], artifacts_dir: Path
) -> None:
    port = free_port()
    env = {**test_env, "HOST": "127.0.0.1", "PORT": str(port)}
    web = Service("web-env", ["-m", "app", "serve"], env, artifacts_dir / f"web-env-{port}.log")
    web.start()
    try:

        def live() -> bool:
            assert web.running, web.output()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=2).is_success
            except httpx.TransportError:
                return False

        wait_until(live, timeout=60, what=f"serve to listen on PORT={port}")
    finally:
        web.stop()


def test_a_malformed_port_is_one_line_and_exit_2(test_env: dict[str, str]) -> None:
    result = run_cli({**test_env, "PORT": "80a"}, "serve")
    assert result.returncode == 2
    assert result.stderr.strip() == "oncereply: PORT: must be a port number (1-65535)"
