"""Logging setup shared by every process, with secrets scrubbed before anything is written.

Tokens travel in query strings and headers of Graph calls; a library that logs a URL or an
exception message would otherwise put them in the log. The filter rewrites the message.
"""

from __future__ import annotations

import logging
import re
import sys

_SECRET_PATTERNS = (
    re.compile(r"(?i)((?:access_token|client_secret|refresh_token|password)=)[^&\s\"']+"),
    re.compile(r"(?i)([?&]code=)[^&\s\"']+"),
    re.compile(r"(?i)(\"(?:access_token|client_secret|password)\"\s*:\s*\")[^\"]+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    # Invite links carry their token in the path (also URL-encoded, in a sign-in's `next`).
    re.compile(r"(?i)(/invite/|%2Finvite%2F)[A-Za-z0-9_-]+"),
    # So do shared report links (`/r/<token>`).
    re.compile(r"(?i)(/r/|%2Fr%2F)[A-Za-z0-9_-]+"),
)


def scrub(text: str) -> str:
    """Replace token-like values with a marker; the key name stays, so the log still reads."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(r"\1[redacted]", text)
    return text


class ScrubSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
    )
    handler.addFilter(ScrubSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Third-party chatter that would log request URLs (and with them, tokens) at INFO.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # SAQ logs every enqueue and every job at INFO: useful when debugging, noise otherwise.
    logging.getLogger("saq").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
