"""`python -m tests.support.debug_web PORT`: the web app as `python -m app serve` runs it, but
on an asyncio event loop in debug mode, which logs every callback that holds the loop past
0.1 s ("Executing … took N seconds"). Tests read those lines (`tests.support.loop_stalls`)."""

from __future__ import annotations

import asyncio
import sys

import uvicorn

from app.asgi import create_app
from app.logs import configure_logging
from app.settings import load_settings
from app.web.bounded_protocol import KEEP_ALIVE_S, bounded_protocol


def main() -> None:
    settings = load_settings()
    configure_logging(settings.log_level)
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level=settings.log_level.lower(),
        access_log=False,
        loop="none",
        timeout_graceful_shutdown=10,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=bounded_protocol(settings.request_read_timeout_s),
    )
    asyncio.run(uvicorn.Server(config).serve(), debug=True)


if __name__ == "__main__":
    main()
