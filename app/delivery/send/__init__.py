"""Send: one `dm_logs` row through the delivery protocol, claim before send.

`dispatch` loads the row and picks the flow from its trigger kind: `comment_flow` (a
comment's public and private reply) or `dm_flow` (taps, DM keyword triggers, follow-ups).
Both use `steps` (checks, the call under a won claim, recording with retries). The single SQL
statements are in `claims` (load, claim) and `recording` (record, settle, postpone), over the
values in `legs`; `outcomes` turns a classified answer into the leg's next state. `budget`
is the hourly private-reply budget (Redis), `quota` the monthly DM quota, `account_state`
the account's 368 pauses and 190 tokens; `scheduling` enqueues delivery jobs with keys that
coalesce. The statements and what each guarantees: docs/architecture.md#statements.
"""
