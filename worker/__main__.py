"""`python -m worker`: load settings (one line and exit 2 if bad), then run the SAQ worker."""

from __future__ import annotations

import sys

from app.logs import configure_logging
from app.settings import SettingsError, load_settings
from worker.runner import run_in_worker_loop, run_worker


def main() -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"oncereply worker: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    run_in_worker_loop(run_worker(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
