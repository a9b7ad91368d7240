"""Rows and content groups the audit's diff and report tests compare, and the report built from them
(helpers and constants, no tests)."""

from __future__ import annotations

from kmirror.audit import report
from kmirror.audit.diff import BucketRow, ContentGroup, classify, compare_sums

NOW = 1_700_000_000_000  # an instant the tests take as now
MIN = 60_000


def row(topic, bucket, src, tgt, differing=0, fly=False):
    return BucketRow(topic, bucket, fly, src, tgt, differing)


def group(ts, locs, key=b"k", topic="t"):
    return ContentGroup(topic, ts, key, locs)


def build_report(rows, groups, *, topics_regex="t.*", spans=(), bucket=10 * MIN, grace_from=None, **context):
    """The report on these rows and content groups, of an audit of topics_regex run at NOW (grace 5
    minutes); context: more fields of report.Context."""
    ctx = report.Context(
        source="src:9092",
        target="tgt:9092",
        topics_regex=topics_regex,
        from_ms=None,
        to_ms=None,
        bucket_ms=bucket,
        grace_ms=5 * MIN,
        now_ms=NOW,
        spans=spans,
        **context,
    )
    grace_from = NOW - 5 * MIN if grace_from is None else grace_from
    return report.build(ctx, compare_sums(rows), classify(groups, bucket, grace_from))
