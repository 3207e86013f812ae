"""Helpers the test suites share: databases, Redis, processes, the sandbox."""
