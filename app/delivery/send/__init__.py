"""Send: one `dm_logs` row through the delivery protocol, claim before send.

`dispatch` picks the flow from the row's trigger kind: `comment_flow` (a comment's public
and private reply) or `dm_flow` (taps, DM keyword triggers, follow-ups). Both use `steps`
(checks, the call under a won claim, recording), `claims` (the single statements), `outcomes`
(a classified answer to the leg's next state), `budget` (the hourly private-reply budget),
`quota` (the monthly DM quota) and `account_state` (368 pauses, 190 tokens). `scheduling`
enqueues delivery jobs with keys that coalesce.
"""
