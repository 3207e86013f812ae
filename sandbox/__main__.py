"""``python -m sandbox [--host H] [--port P] [--fixture PATH]``; see ``sandbox/README.md``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from sandbox.config import ConfigError, load_config
from sandbox.fixture import FixtureError
from sandbox.runtime import Sandbox
from sandbox.server import serve


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = load_config(sys.argv[1:] if argv is None else argv)
        sandbox = Sandbox(config)
    except ConfigError as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        return 2
    except FixtureError as exc:
        sys.stderr.write(f"sandbox: --fixture: {exc}\n")
        return 2
    logging.basicConfig(level=logging.WARNING, format="sandbox %(levelname)s %(name)s: %(message)s")
    sys.stderr.write(f"sandbox: Instagram sandbox on {config.public_url} (admin: /_admin)\n")
    serve(config, sandbox)
    return 0


if __name__ == "__main__":
    sys.exit(main())
