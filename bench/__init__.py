"""Benchmarks: each module here has ``main(argv) -> int`` and prints ratios against a floor measured in the same run.

Speed targets are checked here, never by timed unit tests. ``python -m bench`` runs them all.
"""
