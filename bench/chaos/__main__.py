"""`python -m bench.chaos [--smoke] [--n N] [--seed S]`: one chaos run, its JSON on stdout."""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import signal
import sys
from types import FrameType

from bench.chaos.run import FULL, SMOKE, logs_folder, run


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # Unwinds through the run's `finally`, which stops every process and removes the scratch.
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description="The chaos run (see bench/chaos/__init__.py)")
    parser.add_argument("--smoke", action="store_true", help="300 comments, for make test")
    parser.add_argument("--n", type=int, default=None, help="comments (default 10,000)")
    parser.add_argument("--seed", type=int, default=None, help="randomness seed")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    size = SMOKE if args.smoke else FULL
    if args.n is not None:
        size = dataclasses.replace(size, comments=args.n)
    seed_value = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    result = run(size, seed_value)
    if "logs" not in result:
        shutil.rmtree(logs_folder(), ignore_errors=True)
    print(json.dumps(result, indent=2, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
