"""What the campaign screens share: their cache header and the not-found refusal."""

from __future__ import annotations

from litestar.exceptions import NotFoundException

NO_STORE = {"Cache-Control": "no-store"}


def campaign_not_found() -> NotFoundException:
    return NotFoundException("No such campaign in this workspace.")
