"""The delivery engine: from a stored webhook to a DM sent exactly once.

`ingest` turns stored webhook events (and polled comments) into ledger rows and PENDING
`dm_logs` rows, then hands each new row to a `process_comment` job; `outbox` re-enqueues
events the web process stored but could not enqueue; `intake` is the web process's
group-commit writer for incoming webhook events. The send path (claims, Graph calls,
classification, rate limits, quota, retries) lives beside them.
"""
