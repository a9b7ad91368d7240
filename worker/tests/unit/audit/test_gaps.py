"""The audit's source gaps, pure: which of the mirror's gaps are in the audited topics and window, and
how the report names them (lost on the source before mirroring, never missing on the target)."""

from __future__ import annotations

import pytest

from kmirror.audit import report
from kmirror.audit.diff import BucketRow
from kmirror.audit.gaps import SourceGaps, describe, in_window
from kmirror.audit.scope import SOURCE, TARGET, Span
from kmirror.config.filters import TopicFilter
from kmirror.failover.offsetsync import Gap

from .rows import MIN, NOW, build_report

pytestmark = pytest.mark.audit


def test_gaps_in_the_audited_topics_met_at_or_after_from_once_each_in_order():
    gaps = [
        Gap("orders", 1, 50, 79, True, NOW - 10 * MIN),
        Gap("orders", 0, 5, 9, True, NOW - 90 * MIN),  # met before --from: its records are older
        Gap("orders", 0, 20, 29, False, NOW - 5 * MIN),
        Gap("other", 0, 0, 9, True, NOW),  # not an audited topic
        Gap("orders", 1, 50, 79, True, NOW - 8 * MIN),  # the same gap recorded again
    ]
    topics = TopicFilter(include="orders")
    assert in_window(gaps, topics, NOW - 60 * MIN) == [
        Gap("orders", 0, 20, 29, False, NOW - 5 * MIN),
        Gap("orders", 1, 50, 79, True, NOW - 10 * MIN),
    ]
    assert len(in_window(gaps, topics, None)) == 3


def test_where_gaps_were_looked_for():
    assert SourceGaps("kmirror-east").as_dict() == {
        "mirror": "kmirror-east",
        "topic": "__kmirror-offset-syncs",
        "status": "read",
    }
    assert SourceGaps(None).as_dict()["status"].startswith("not read: --source.config has no group.id")
    assert SourceGaps("m", error="refused").as_dict()["status"] == "not read: refused"


def build(source_gaps):
    rows = [BucketRow("orders", 0, False, 20, 0), BucketRow("orders", 0, False, 0, 20)]
    spans = [Span(SOURCE, "orders", 0, 80, 100), Span(TARGET, "orders", 0, 0, 20)]
    return build_report(rows, [], topics_regex="orders", spans=spans, source_name="east", target_name="dc2",
                        source_gaps=source_gaps)  # fmt: skip


def test_a_lost_gap_is_named_counted_apart_from_missing_and_fails_the_audit():
    rep = build(SourceGaps("kmirror-east", [Gap("orders", 0, 50, 79, True, NOW - MIN)]))
    assert rep["gaps"] == [
        {
            "topic": "orders",
            "partition": 0,
            "first": 50,
            "last": 79,
            "lost": True,
            "ms": NOW - MIN,
            "records": 30,
            "at": "2023-11-14T22:12:20.000Z",
            "kind": "lost",
        }
    ]
    t = rep["totals"]
    assert (t["missing"], t["lost_in_gaps"]) == (0, 30)
    assert rep["topics"][0]["lost_in_gaps"] == 30 and rep["remirror"] == []
    assert rep["exit_code"] == 1 and rep["verdict"] == "incomplete"
    assert rep["summary"].startswith(
        "INCOMPLETE: 0 missing, 0 duplicated, 0 unexpected, 0 in flight, 30 lost on the source before "
        "mirroring (1 source gap(s)); 20 source and 20 target records"
    )
    assert rep["next_steps"] == [
        "Lost on source east before the mirror copied them (source gaps, not missing on the target): "
        "orders/0 offsets 50-79 (30 records, met at 2023-11-14T22:12:20.000Z). They are on neither "
        "cluster: nothing to re-mirror; produce them again upstream if you can, and find why the mirror "
        "fell behind retention (docs/runbooks/source-gap.md)."
    ]
    assert describe(rep["gaps"][0]) == (
        "gap: orders/0 offsets 50..79 (30 records) lost on the source before mirroring (purged before the "
        "mirror copied them; on neither cluster); met by the mirror at 2023-11-14T22:12:20.000Z"
    )
    page = report.render_html(rep)
    table = page[page.index('<table class="gaps">') :]
    assert "<td>50</td><td>79</td><td>30</td>" in table and "lost before mirroring" in page


def test_a_gap_not_lost_is_named_and_does_not_fail_the_audit():
    rep = build(SourceGaps("kmirror-east", [Gap("orders", 0, 100, 119, False, NOW)]))
    assert rep["exit_code"] == 0 and rep["totals"]["lost_in_gaps"] == 0
    assert rep["gaps"][0]["kind"] == "no longer on the source"
    assert "0 lost on the source before mirroring (1 source gap(s))" in rep["summary"]
    assert "not lost" in rep["next_steps"][0]


def test_no_gaps_or_none_read_keeps_the_report_as_before():
    rep = build(None)
    assert rep["gaps"] == [] and rep["exit_code"] == 0
    assert rep["summary"].startswith(
        "COMPLETE: 0 missing, 0 duplicated, 0 unexpected, 0 in flight; 20 source"
    )
    assert 'class="gaps"' not in report.render_html(rep)
    rep = build(
        SourceGaps("m", error="__kmirror-offset-syncs on the target: Broker: Topic authorization failed")
    )
    assert rep["exit_code"] == 0
    assert rep["warnings"] == [
        "source gaps not read: __kmirror-offset-syncs on the target: Broker: Topic authorization failed"
    ]
