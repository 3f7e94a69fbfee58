"""Benchmarks (scripts, not tests): see docs/benchmarks.md."""
