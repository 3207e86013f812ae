"""Operational records: the alerts timeline creators and operators read."""
