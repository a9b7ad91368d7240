"""Test support: Apache Kafka clusters from Kafka's own pinned jars (``kafka``, ``jars``, ``embedded``)
and a single-process compare.

Used by the demo, the tests and the benchmarks; the mirror never imports it.
"""
