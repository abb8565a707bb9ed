"""The benchmark suite (run by tests/bench/run.py, never collected by pytest)."""
