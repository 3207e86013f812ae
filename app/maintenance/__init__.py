"""Housekeeping the worker runs on a schedule: `retention` forgets expired idempotency keys
and the bodies of webhook events processed long ago (the `purge_expired` job).
"""
