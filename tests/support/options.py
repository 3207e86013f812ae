"""Defaults for command-line options of plugins, set from a conftest's `pytest_configure`."""

from __future__ import annotations

import os
import shlex

import pytest


def default_option(config: pytest.Config, flag: str, value: str) -> None:
    """Use `value` for `flag` unless the command line (or PYTEST_ADDOPTS) gave one."""
    given = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    if any(arg == flag or arg.startswith(f"{flag}=") for arg in given):
        return
    setattr(config.option, flag.removeprefix("--").replace("-", "_"), value)
