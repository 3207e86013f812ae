"""What the route fuzzer (tests/fuzz) works against: the web process, its log, the people."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.support.loop_stalls import LogWatch
from tests.support.processes import Service


@dataclass
class Target:
    base_url: str
    web: Service
    log: LogWatch
    webhook_secret: str
    clients: dict[str, httpx.Client]
    csrf: dict[str, str]
    known_ids: list[int]
    requests: Counter[str] = field(default_factory=Counter)
