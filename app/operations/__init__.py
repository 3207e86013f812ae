"""Operational records: the events timeline creators and operators read (`events`), alerts
that outsiders could trigger in bulk, throttled (`alerts`), and the idempotency keys that make
every dashboard form and button do its work once (`idempotency`).
"""
