"""The run's verdict (pure): what the sandbox delivered against what our database says.

The two records are read separately and compared comment by comment:

- from the sandbox: every comment the fans made, what happened to its webhook (dropped, sent,
  sent three times), and the private replies it delivered (message ids);
- from our database: the ledger (how each comment was first seen) and each comment's
  `dm_logs` row (state, message id, whether the inbox check has looked).

`duplicates`: comments with more than one private reply delivered. `lost`: comments with no
row at all. `not_final`: rows still PENDING or IN_FLIGHT. `false_sent`: rows SENT while the
sandbox delivered nothing for that comment, or SENT with a message id that is not one the
sandbox delivered for it (another row's message). `failed_delivered`: rows FAILED or SKIPPED
whose comment did get a private reply (the dashboard would say it never went). `ok` needs all
five at zero. UNCONFIRMED rows are allowed (we did not know), and counted:
`unconfirmed_delivered` are those the sandbox shows delivered, after the inbox check ran;
`unconfirmed_unchecked` those the inbox check never looked at, `unconfirmed_missed_by_check`
those it looked at and did not find although the sandbox delivered them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

NOT_FINAL = frozenset({"PENDING", "IN_FLIGHT"})
SAMPLES = 10


@dataclass(frozen=True, slots=True)
class Row:
    state: str
    message_id: str | None = None
    checked: bool = False  # the inbox check reached a result (UNCONFIRMED rows)


@dataclass(frozen=True, slots=True)
class Observed:
    comments: Sequence[str]  # every comment a fan made, in order
    rows: Mapping[str, Row]  # comment id → its dm_logs row
    delivered: Mapping[str, Sequence[str]]  # comment id → message ids of its private replies
    seen_via: Mapping[str, str] = field(default_factory=dict)  # comment id → webhook / poll
    dropped: Set[str] = frozenset()  # webhook never sent
    given_up: Set[str] = frozenset()  # webhook sent, never answered 2xx
    duplicated: Set[str] = frozenset()  # webhook sent more than once


def judge(observed: Observed) -> dict[str, Any]:
    """The counts of the report, with a few comment ids of each problem to look into."""
    problems: dict[str, list[str]] = {
        "duplicates": [],
        "lost": [],
        "not_final": [],
        "false_sent": [],
        "failed_delivered": [],
    }
    unconfirmed = unconfirmed_delivered = 0
    # UNCONFIRMED rows, for a look (none is a wrong answer): never checked in the inbox;
    # checked but not found although delivered; not delivered at all.
    unconfirmed_rows: dict[str, list[str]] = {"unchecked": [], "missed": [], "undelivered": []}
    states: dict[str, int] = {}
    for comment in observed.comments:
        mids = list(observed.delivered.get(comment, ()))
        row = observed.rows.get(comment)
        if len(mids) > 1:
            problems["duplicates"].append(comment)
        if row is None:
            problems["lost"].append(comment)
            continue
        states[row.state] = states.get(row.state, 0) + 1
        if row.state in NOT_FINAL:
            problems["not_final"].append(comment)
        elif row.state == "SENT":
            if not mids or (row.message_id is not None and row.message_id not in mids):
                problems["false_sent"].append(comment)
        elif row.state == "UNCONFIRMED":
            unconfirmed += 1
            unconfirmed_delivered += bool(mids)
            if not row.checked:
                unconfirmed_rows["unchecked"].append(comment)
            elif mids:
                unconfirmed_rows["missed"].append(comment)
            if not mids:
                unconfirmed_rows["undelivered"].append(comment)
        elif mids:
            problems["failed_delivered"].append(comment)
    missed_webhook = observed.dropped | observed.given_up
    counts = {name: len(found) for name, found in problems.items()}
    return {
        "comments": len(observed.comments),
        **counts,
        "unconfirmed": unconfirmed,
        "unconfirmed_delivered": unconfirmed_delivered,
        "unconfirmed_unchecked": len(unconfirmed_rows["unchecked"]),
        "unconfirmed_missed_by_check": len(unconfirmed_rows["missed"]),
        "private_replies_delivered": sum(len(m) for m in observed.delivered.values()),
        "final_states": dict(sorted(states.items())),
        "webhooks_dropped": len(observed.dropped),
        "webhooks_given_up": len(observed.given_up),
        "webhooks_duplicated": len(observed.duplicated),
        "recovered_by_reconciler": sum(
            1 for c in missed_webhook if observed.seen_via.get(c) == "poll"
        ),
        "seen_first_by_poll": sum(1 for via in observed.seen_via.values() if via == "poll"),
        "ok": not any(counts.values()),
        "examples": {name: found[:SAMPLES] for name, found in problems.items() if found},
        "unconfirmed_examples": {
            f"unconfirmed_{name}": found[:SAMPLES]
            for name, found in unconfirmed_rows.items()
            if found
        },
    }
