"""Housekeeping the worker runs on a schedule: `retention` forgets expired idempotency keys,
the bodies of webhook events processed long ago, old hourly counts of repeats and the people
who tapped per day (their count and who they were) past the funnel's days (the
`purge_expired` job).
"""
