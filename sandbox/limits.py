"""Rate limits and the usage header Meta sends with them (`X-Business-Use-Case-Usage`).

Per account: sends per second (code 4), private replies per rolling hour (613/2534040), and
Conversations API calls per second. Every window is a deque of times from the sandbox clock,
pruned from the left, so a check is amortised O(1) and advancing the clock frees budget.
"""

from __future__ import annotations

import json
import math
from collections import deque

from sandbox.errors import IG, GraphError, app_rate_limited


class SlidingWindow:
    def __init__(self, span: float) -> None:
        self.span = span
        self._times: dict[str, deque[float]] = {}

    def _pruned(self, key: str, now: float) -> deque[float]:
        times = self._times.get(key)
        if times is None:
            times = self._times[key] = deque()
        edge = now - self.span
        while times and times[0] <= edge:
            times.popleft()
        return times

    def count(self, key: str, now: float) -> int:
        return len(self._pruned(key, now))

    def add(self, key: str, now: float) -> None:
        self._pruned(key, now).append(now)

    def seconds_until_free(self, key: str, now: float) -> float:
        times = self._pruned(key, now)
        return max(0.0, times[0] + self.span - now) if times else 0.0


class Limits:
    def __init__(self) -> None:
        self.sends = SlidingWindow(1.0)
        self.private_replies = SlidingWindow(3600.0)
        self.conversations = SlidingWindow(1.0)
        self._hour = -1
        self._calls_this_hour = 0

    def count_call(self, now: float) -> None:
        hour = int(now // 3600)
        if hour != self._hour:
            self._hour, self._calls_this_hour = hour, 0
        self._calls_this_hour += 1

    def app_usage_header(self) -> str:
        # Percentages of a notional app budget; enough for a client that watches the header.
        percent = min(100, self._calls_this_hour // 2000)
        usage = {"call_count": percent, "total_time": percent // 2, "total_cputime": percent // 2}
        return json.dumps(usage, separators=(",", ":"))

    def business_usage_header(
        self, account_id: str, now: float, per_hour: int, *, throttled: bool = False
    ) -> str:
        """The account's BUC usage: the private-reply hour's share, or 100 when `throttled`
        by another limit (the per-second sends, whose wait is under a minute, so 0 minutes)."""
        used = self.private_replies.count(account_id, now)
        percent = 100 if throttled else min(100, used * 100 // per_hour)
        wait_minutes = 0
        if used >= per_hour:
            wait_minutes = math.ceil(self.private_replies.seconds_until_free(account_id, now) / 60)
        usage = {
            "type": "instagram",
            "call_count": percent,
            "total_cputime": percent // 4,
            "total_time": percent // 3,
            "estimated_time_to_regain_access": wait_minutes,
        }
        return json.dumps({account_id: [usage]}, separators=(",", ":"))

    def take_send(self, account_id: str, now: float, per_second: int, per_hour: int) -> None:
        if self.sends.count(account_id, now) >= per_second:
            error = app_rate_limited()
            # Like the 613 answer and every delivered send, so a client always finds the header.
            error.headers["X-Business-Use-Case-Usage"] = self.business_usage_header(
                account_id, now, per_hour, throttled=True
            )
            raise error
        self.sends.add(account_id, now)

    def check_private_reply(self, account_id: str, now: float, per_hour: int) -> None:
        if self.private_replies.count(account_id, now) >= per_hour:
            raise GraphError(
                "(#613) Calls to this api have exceeded the rate limit.",
                613,
                subcode=2534040,
                is_transient=True,
                headers={
                    "X-Business-Use-Case-Usage": self.business_usage_header(
                        account_id, now, per_hour
                    )
                },
            )

    def take_conversation_call(self, account_id: str, now: float, per_second: int) -> None:
        if self.conversations.count(account_id, now) >= per_second:
            raise GraphError(
                "(#613) Calls to this api have exceeded the rate limit.",
                613,
                type_=IG,
                is_transient=True,
            )
        self.conversations.add(account_id, now)
