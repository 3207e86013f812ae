"""Benchmarks: each script starts what it measures against scratch state and prints JSON."""
