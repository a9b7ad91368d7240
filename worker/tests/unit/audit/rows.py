"""Rows and content groups the audit's diff and report tests compare (helpers and constants, no tests)."""

from __future__ import annotations

from kmirror.audit.diff import BucketRow, ContentGroup

NOW = 1_700_000_000_000  # an instant the tests take as now
MIN = 60_000


def row(topic, bucket, src, tgt, differing=0, fly=False):
    return BucketRow(topic, bucket, fly, src, tgt, differing)


def group(ts, locs, key=b"k", topic="t"):
    return ContentGroup(topic, ts, key, locs)
