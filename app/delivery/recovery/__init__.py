"""Recovery: the safety nets that settle what a send, a worker or a webhook left open.

`sweeps` (stale claims → UNCONFIRMED; due work re-enqueued), `inbox_check` (an UNCONFIRMED
send looked for in the conversation), `manual_retry` (a creator's Retry), `reconcile` (the
sweep that reads back the comments webhooks missed and backfills them, planned by
`reconcile_plan`) and `next_post` (binding a next-post campaign and backfilling it). When each
runs and what it settles: docs/architecture.md#recovery.
"""
