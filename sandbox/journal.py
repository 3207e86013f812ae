"""What happened, for the inspection API: send requests, delivered messages, public replies.

Appends only, so the hot path pays one list append per record; filtering happens when a test
asks, not when a message is sent.
"""

from __future__ import annotations

from typing import Any

from sandbox.models import Message


class Journal:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delivered: list[Message] = []
        self.public_replies: list[dict[str, Any]] = []

    def start_request(
        self,
        *,
        endpoint: str,
        method: str,
        path: str,
        time: float,
        account_id: str | None,
        comment_id: str | None,
        fan: str | None,
        body: Any,
    ) -> dict[str, Any]:
        """Record a send request as it arrives; the caller fills in the outcome later."""
        record: dict[str, Any] = {
            "seq": len(self.requests) + 1,
            "time": time,
            "endpoint": endpoint,
            "method": method,
            "path": path,
            "account_id": account_id,
            "comment_id": comment_id,
            "recipient": fan,
            "body": body,
            "status": None,
            "error": None,
            "result": None,
            "fault": None,
            "delivered": False,
        }
        self.requests.append(record)
        return record
