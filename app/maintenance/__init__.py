"""Housekeeping the worker runs on a schedule."""
