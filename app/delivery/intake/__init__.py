"""Intake: from a webhook (or a polled comment) to durable work.

The web process's writer (`webhook_writer`), the worker's ingest of stored events (`outbox`,
`ingest`, `triggers` for taps and DM keyword triggers) and the multi-row writes they share
(`bulk`). Nothing here calls Meta's send endpoints.
"""
