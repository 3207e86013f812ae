"""Intake: from a webhook (or a polled comment) to durable work.

The web process's writer (`webhook_writer`); the worker's relay and ingest job (`outbox`),
which runs a batch of stored events (`ingest`) through the comments (`comments`: ledger rows
and PENDING deliveries) and the messaging items (`messaging_events`: ledger rows; `triggers`:
taps and DM keyword triggers made into work); and the multi-row writes they share (`bulk`).
Nothing here calls Meta's send endpoints.
"""
