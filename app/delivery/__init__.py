"""The delivery engine: from a stored webhook to a DM sent exactly once, by stage.

- `intake`: from a webhook (or a polled comment) to durable work — ledger rows and PENDING
  `dm_logs` rows, each handed to a delivery job.
- `send`: one `dm_logs` row through the delivery protocol, claim before send.
- `content`: what a delivery says, as pure functions over a campaign's settings.
- `recovery`: the safety nets that settle what a send, a worker or a webhook left open.

Each stage may use the ones after it in this order — recovery → intake → send → content —
never one before it (an import contract). The path of one comment through them is
docs/architecture.md#comment-path; the rules that make its reply go out once,
docs/architecture.md#delivery-protocol.
"""
