"""The jobs the worker runs: one registry table (`registry`) of every job's name, function,
run options and cron schedule, and the thin functions themselves (`handlers`).

The top of the layering: handlers call into delivery, accounts and maintenance. Each process's
entry point hands `registry.JOB_OPTIONS` to the queue it opens (`app.queue.open_queue`), and
the worker process (`worker/`) builds its SAQ worker from `registry.JOBS`. The table of
jobs, keys and schedules: docs/architecture.md#queue.
"""
