"""Test support: embedded Tansu clusters and a single-process compare.

Used by the demo, the tests and the benchmarks; the mirror never imports it.
"""
