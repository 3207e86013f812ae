"""Housekeeping the worker runs on a schedule: `retention` forgets expired idempotency keys
, the bodies of webhook events processed long ago, old hourly counts of repeats and the
people kept per day of taps past the funnel's days (the `purge_expired` job).
"""
