"""The chaos run: 10,000 comments through the real path under faults, then "once, never
twice, never lost" proved from two independent records.

    uv run python -m bench.chaos            # 10,000 comments (make chaos)
    uv run python -m bench.chaos --smoke    # 300 comments, for make test

The run starts its own PostgreSQL cluster and redis-server in a scratch folder (`services`),
so it can restart them, then the sandbox, two web processes behind a round-robin balancer
(`balancer`) and three workers (`fleet`). One account gets a post campaign per post
(`world`). Fans comment at a steady rate (`plan`); the sandbox sends signed comment webhooks
to the balancer, dropping 10% (only the reconciler, its interval shortened to 10 s, brings
those back) and sending 30% three times. Sends meet deliver-then-error, deliver-then-hang and
deliver-then-reset (~5% together), retryable (~5%) and final (~3%) rejections. Meanwhile a
worker is SIGKILLed every 20 s and started again, Redis is restarted empty once and
PostgreSQL restarted (immediate shutdown) once.

Waiting is on progress (`progress`): the run ends when every comment has a final row, every
UNCONFIRMED row has had its inbox check and nothing has changed for a few seconds, or gives
up when nothing at all has changed for minutes. Retries wait 5 and 15 minutes in production;
the run moves a waiting retry's time to the past (`retry_waits_skipped`) so the due-work relay
takes it, which is the only thing it changes behind the product's back.

Then `verdict` compares, comment by comment, the sandbox's record (what was delivered, which
webhooks were dropped or repeated) with our database (ledger and rows), and the run prints one
JSON object; the exit status is 1 unless `ok`. Every process and the scratch folder are
removed at the end, also on failure, Ctrl-C or SIGTERM; the processes' logs stay in
`test-results/chaos/<pid>/` only when the run was not ok. For a few comments of each problem,
and of the UNCONFIRMED rows, the JSON shows our row with its attempts and the sandbox's send
requests (`explained`).
"""
