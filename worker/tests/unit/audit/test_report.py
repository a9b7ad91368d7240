"""kmirror.audit.report: the report and its exit code, error lines, the HTML page, next steps."""

from __future__ import annotations

import re

import pytest

from kmirror.audit import job, report
from kmirror.audit.scope import (
    SOURCE,
    TARGET,
    Span,
)

from .rows import MIN, NOW, build_report, group, row

pytestmark = pytest.mark.audit

# ------------------------------------------------------------------------------------------ report


def build(rows, groups, *, max_listed=100, **kw):
    return build_report(rows, groups, max_listed=max_listed, **kw)


def test_complete_report():
    rows = [row("t", 0, 4, 0), row("t", 0, 0, 4)]
    spans = [Span(SOURCE, "t", 0, 0, 4), Span(SOURCE, "t", 1, 0, 0), Span(TARGET, "t", 2, 0, 4)]
    rep = build(rows, [], spans=spans)
    assert rep["verdict"] == "complete" and rep["exit_code"] == 0 == report.exit_code(rep)
    assert rep["totals"]["source_records"] == 4 and rep["totals"]["missing"] == 0
    assert rep["buckets"] == [
        {
            "topic": "t",
            "start": "1970-01-01T00:00:00.000Z",
            "start_ms": 0,
            "source_records": 4,
            "target_records": 4,
            "checksums_match": True,
            "missing": 0,
            "duplicated": 0,
            "unexpected": 0,
            "in_flight": 0,
            "in_flight_target": 0,
            "completeness": 1.0,
        }
    ]
    assert rep["clusters"]["source"] == {
        "name": "source",
        "bootstrap": "src:9092",
        "partitions": 2,
        "offsets_planned": 4,
    }
    assert rep["remirror"] == []
    assert rep["next_steps"] == [
        "Nothing to do: every record of source source in the window is on target target exactly once."
    ]
    assert rep["summary"].startswith("COMPLETE: 0 missing, 0 duplicated")
    assert rep["window"]["bucket"] == "10m" and rep["window"]["grace"] == "5m"


def test_incomplete_report_counts_per_bucket_topic_and_total():
    b = 10 * MIN
    rows = [
        row("t", 0, 10, 9, differing=1),
        row("t", b, 5, 7, differing=2),
        row("u", 0, 1, 1),
    ]
    groups = [
        group(5, [(SOURCE, 0, 3)]),
        group(b + 1, [(SOURCE, 0, 11), (TARGET, 0, 10), (TARGET, 0, 12)]),
        group(b + 2, [(TARGET, 0, 15)]),
    ]
    rep = build(rows, groups)
    assert rep["exit_code"] == 1 and rep["verdict"] == "incomplete"
    t = {x["topic"]: x for x in rep["topics"]}
    assert (t["t"]["missing"], t["t"]["duplicated"], t["t"]["unexpected"]) == (1, 1, 1)
    assert t["t"]["buckets_differing"] == 2 and t["u"]["buckets_differing"] == 0
    assert rep["totals"]["source_records"] == 16 and rep["totals"]["target_records"] == 17
    first = rep["buckets"][0]
    assert (first["topic"], first["completeness"], first["checksums_match"]) == ("t", 0.9, False)
    assert rep["missing_records"] == [{"topic": "t", "timestamp": 5, "key": "k", "partition": 0, "offset": 3}]
    assert rep["summary"].startswith("INCOMPLETE: 1 missing, 1 duplicated, 1 unexpected, 0 in flight")


def test_unexpected_alone_and_in_flight_do_not_fail_the_audit():
    rows = [row("t", 0, 1, 2, differing=1)]
    assert build(rows, [group(5, [(SOURCE, 0, 0), (TARGET, 0, 0)])], grace_from=0)["exit_code"] == 0
    rep = build(rows, [group(7, [(TARGET, 0, 1)])])
    assert rep["exit_code"] == 0 and rep["totals"]["unexpected"] == 1
    recent = [row("t", NOW - NOW % (10 * MIN), 1, 0, differing=1, fly=True)]
    rep = build(recent, [group(NOW - 1, [(SOURCE, 0, 0)])])
    assert rep["exit_code"] == 0 and rep["totals"]["in_flight"] == 1 and rep["totals"]["missing"] == 0
    assert rep["buckets"][0]["completeness"] == 0.0


def test_listing_is_capped_and_says_so():
    rows = [row("t", 0, 3, 0, differing=3)]
    groups = [group(i, [(SOURCE, 0, i)]) for i in range(3)]
    rep = build(rows, groups, max_listed=2)
    assert len(rep["missing_records"]) == 2 and rep["totals"]["missing"] == 3
    assert rep["truncated"]["missing_records"] is True


def test_hash_difference_without_named_records_is_a_warning():
    rows = [row("t", 0, 1, 1, differing=1)]
    rep = build(rows, [])
    assert rep["exit_code"] == 0 and len(rep["warnings"]) == 1 and "retention" in rep["warnings"][0]


def test_html_is_self_contained_with_a_chart_per_topic():
    b = 10 * MIN
    rows = [
        row("t", 0, 10, 9, differing=1),
        row("t", 3 * b, 4, 4),
        row("<u>", 0, 0, 1, differing=1),
    ]
    rep = build(rows, [group(5, [(SOURCE, 0, 3)]), group(6, [(TARGET, 0, 0)], topic="<u>")])
    page = report.render_html(rep)
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2
    assert "<script" not in page and not re.search(r"(src|href)=", page)
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "INCOMPLETE: 1 missing" in page
    assert "&lt;u&gt;" in page and "<u>" not in page
    assert "4 bucket(s) of 10m" in page  # the gap between bucket 0 and 3 is drawn
    assert 'fill="#d62728"' in page  # red: missing part of the first bucket
    assert page.count("<title>") == 1 + 3  # the page's title and one tooltip per bucket


def test_exit_codes_and_error_lines():
    assert (report.EXIT_COMPLETE, report.EXIT_DIFFERENT, report.EXIT_ERROR) == (0, 1, 2)
    trace = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 3, in read\nRuntimeError: source t/0: nothing read after offset 4 in 60 s\n'
    )
    assert (
        job.short_error(Exception(trace)) == "RuntimeError: source t/0: nothing read after offset 4 in 60 s"
    )
    assert job.short_error(Exception("plain\nsecond")) == "plain"


@pytest.mark.parametrize(
    ("first", "end", "step", "count"),
    [
        (0, 60 * MIN, 10 * MIN, 7),  # an hour: every 10 minutes, both ends labelled
        (20_000, 180_000, 30_000, 6),  # 18 buckets of 10 s, starting off a step
        (0, 10 * MIN, 2 * MIN, 6),  # one bucket of 10 minutes
        (NOW, NOW + 3 * 86_400_000, 12 * 3_600_000, 6),  # days, from 22:13: every 12 hours
    ],
)
def test_time_axis_has_several_labelled_ticks_on_round_instants(first, end, step, count):
    got_step, ticks = report.time_ticks(first, end)
    assert got_step == step and len(ticks) == count
    assert all(t % step == 0 and first <= t <= end for t in ticks)
    assert 2 <= len(ticks) <= report._MAX_TICKS


def test_next_steps_name_ranges_to_copy_and_where_to_look():
    rows = [row("t", 0, 10, 10, differing=4)]
    groups = [
        group(5, [(SOURCE, 1, 7)]),
        group(6, [(SOURCE, 1, 9)]),
        group(7, [(SOURCE, 0, 2)]),
        group(8, [(SOURCE, 0, 3), (TARGET, 2, 4), (TARGET, 2, 5)]),
        group(9, [(TARGET, 1, 6)]),
    ]
    rep = build(rows, groups)
    assert [(r["partition"], r["from_offset"], r["to_offset"], r["missing"]) for r in rep["remirror"]] == [
        (0, 2, 2, 1),
        (1, 7, 9, 2),
    ]
    missing, dup, unexpected = rep["next_steps"]
    assert missing.startswith(
        "Re-mirror these ranges of source source: t/0 offsets 2-2 (1 missing); t/1 offsets 7-9 (2 missing)."
    )
    assert (
        "kmirror@source" in missing and "from 1970-01-01T00:00:00.005Z to 1970-01-01T00:00:00.007Z" in missing
    )
    assert dup.startswith("1 extra copies on target target (at 1970-01-01T00:00:00.008Z)")
    assert unexpected.startswith("1 records only on target target (topics t)")
    page = report.render_html(rep)
    assert page.count("<li>") == 3 and 'id="what-next"' in page
