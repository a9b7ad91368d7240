"""The audit's pure parts: planning offset ranges, bucketing, comparing sums, naming differences,
building the report and its exit code, the HTML page."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kmirror.audit import diff, job, report
from kmirror.audit.diff import BucketRow, ContentGroup, classify, compare_sums
from kmirror.audit.scope import (
    SOURCE,
    TARGET,
    Span,
    bucket_of,
    iso,
    output_dir,
    parse_duration,
    parse_time,
    planned_end,
    tasks,
)
from kmirror.errors import ConfigError

NOW = 1_700_000_000_000
MIN = 60_000


# ------------------------------------------------------------------------------------------ planning


def test_planned_end_takes_the_furthest_of_watermark_and_last_offset_read():
    assert planned_end(100, 99) == 100  # Kafka: the high watermark is right
    assert planned_end(97, 99) == 100  # the test broker: high watermark behind the log
    assert planned_end(100, 120) == 121  # records appended since the watermark was read
    assert planned_end(0, None) == 0


def test_tasks_cut_each_cluster_into_equal_tasks_of_one_cluster_largest_first():
    six = [Span(SOURCE, "a", p, 0, 166_667) for p in range(6)] + [
        Span(TARGET, "a", p, 10, 165_927) for p in range(6)
    ]
    out = tasks(six, 1_000_000, cores=2)  # about 2 tasks per core
    assert [sum(r.size for r in t) for t in out] == [500_001, 500_001, 497_751, 497_751]
    assert all(len({r.side for r in t}) == 1 for t in out)
    for side in (SOURCE, TARGET):  # every offset in exactly one task
        got = sorted((r.partition, r.start, r.end) for t in out for r in t if r.side == side)
        want = sorted((s.partition, s.start, s.end) for s in six if s.side == side)
        assert _merged(got) == want
    # the size cap wins over the tasks per core; a task is never empty and ranges are never empty
    spans = [Span(SOURCE, "a", 0, 10, 35), Span(TARGET, "a", 0, 0, 7), Span(SOURCE, "b", 1, 5, 5)]
    out = tasks(spans, 10, cores=1)
    assert [[(r.topic, r.start, r.end) for r in t] for t in out] == [
        [("a", 10, 19)], [("a", 19, 28)], [("a", 28, 35)], [("a", 0, 7)]
    ]  # fmt: skip
    assert all(r.size for t in out for r in t)
    assert tasks([], 10, cores=4) == []
    with pytest.raises(ValueError):
        tasks(spans, 0, cores=1)


def _merged(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for p, start, end in ranges:
        if out and out[-1][0] == p and out[-1][2] == start:
            out[-1] = (p, out[-1][1], end)
        else:
            out.append((p, start, end))
    return out


def test_span_round_trips_as_a_list():
    s = Span(TARGET, "t.x", 3, 7, 9)
    assert Span.from_list(s.as_list()) == s


# ------------------------------------------------------------------------------------------ times


def test_buckets_are_aligned_on_the_epoch():
    b = 10 * MIN
    assert bucket_of(NOW, b) == NOW - NOW % b
    assert bucket_of(NOW - NOW % b, b) == NOW - NOW % b
    assert bucket_of(NOW - NOW % b - 1, b) == NOW - NOW % b - b
    assert bucket_of(-1, b) == -b  # floor, also before the epoch
    assert iso(bucket_of(parse_time("2024-05-01T10:17:59Z", "x", NOW), b)) == "2024-05-01T10:10:00.000Z"


def test_durations():
    assert parse_duration("10m", "--bucket") == 600_000
    assert parse_duration("500ms", "--grace") == 500
    assert parse_duration("2h", "--x") == 7_200_000
    assert parse_duration("1d", "--x") == 86_400_000
    for bad in ("10", "m", "-5m", "0s", "1.5h"):
        with pytest.raises(ConfigError) as err:
            parse_duration(bad, "--bucket")
        assert "--bucket" in str(err.value)


def test_times():
    assert parse_time("1700000000123", "--from", NOW) == 1_700_000_000_123
    assert parse_time("now", "--to", NOW) == NOW
    assert parse_time("-2h", "--from", NOW) == NOW - 7_200_000
    assert parse_time("now-30m", "--from", NOW) == NOW - 1_800_000
    assert parse_time("2023-11-14T22:13:20Z", "--from", NOW) == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20", "--from", NOW) == 1_700_000_000_000  # UTC
    assert parse_time("2023-11-14T23:13:20+01:00", "--from", NOW) == 1_700_000_000_000
    with pytest.raises(ConfigError, match="seconds"):
        parse_time("1700000000", "--from", NOW)
    with pytest.raises(ConfigError, match="invalid time"):
        parse_time("yesterday", "--from", NOW)


def test_output_dir_fills_strftime_fields_in_utc():
    now = datetime(2024, 5, 1, 10, 17, tzinfo=UTC)
    assert output_dir("/var/lib/audit/%Y-%m-%dT%H%M", now) == Path("/var/lib/audit/2024-05-01T1017")
    assert output_dir("out", now) == Path("out")


# ------------------------------------------------------------------------------------------ sums


def row(topic, bucket, src, tgt, differing=0, fly=False):
    return BucketRow(topic, bucket, fly, src, tgt, differing)


def test_compare_sums_adds_up_units_and_finds_the_differing_ones():
    b1, b2 = 0, 600_000
    rows = [
        # bucket 1: the same contents, reported in several parts: equal
        row("t", b1, 3, 2),
        row("t", b1, 2, 3),
        # bucket 2: as many records on both sides, but one content has a different number of copies
        row("t", b2, 2, 0),
        row("t", b2, 0, 2, differing=1),
        # topic only on the target
        row("extra", b1, 0, 1, differing=1),
    ]
    p1 = compare_sums(rows)
    assert p1.differing == {("t", b2, False), ("extra", b1, False)}
    assert p1.units[("t", b1, False)] == diff.UnitSums(5, 5, 0)
    assert p1.units[("t", b2, False)] == diff.UnitSums(2, 2, 1)
    # Counts that differ make a unit differ even without a named content.
    assert compare_sums([row("t", b1, 2, 1)]).differing == {("t", b1, False)}


def test_in_flight_is_its_own_unit():
    rows = [row("t", 0, 2, 2), row("t", 0, 1, 0, differing=1, fly=True)]
    assert compare_sums(rows).differing == {("t", 0, True)}


# ------------------------------------------------------------------------------------------ records


def group(ts, locs, key=b"k", topic="t"):
    return ContentGroup(topic, ts, key, locs)


def test_classify_names_missing_duplicated_unexpected_and_in_flight():
    bucket = 10 * MIN
    grace_from = 5 * bucket  # records at or after this are in flight
    groups = [
        group(100, [(SOURCE, 0, 4)]),  # missing
        group(200, [(SOURCE, 1, 7), (TARGET, 2, 3), (TARGET, 0, 9), (TARGET, 0, 1)]),  # 2 duplicated
        group(300, [(TARGET, 1, 5)], key=None),  # unexpected
        group(grace_from + 1, [(SOURCE, 0, 8)]),  # in flight, not missing
        group(grace_from + 2, [(TARGET, 0, 12)]),  # recent, target only: not unexpected
        group(bucket + 5, [(SOURCE, 0, 1), (SOURCE, 0, 2), (TARGET, 1, 1)]),  # 2 copies in source, 1 target
    ]
    d = classify(groups, bucket, grace_from)
    assert d.missing_records == [
        {"topic": "t", "timestamp": bucket + 5, "key": "k", "partition": 0, "offset": 2},
        {"topic": "t", "timestamp": 100, "key": "k", "partition": 0, "offset": 4},
    ]  # in partition and offset order
    assert [(r["partition"], r["offset"], r["copies"]) for r in d.duplicated_records] == [
        (0, 9, 3),
        (2, 3, 3),
    ]
    assert d.unexpected_records == [
        {"topic": "t", "timestamp": 300, "key": None, "partition": 1, "offset": 5}
    ]
    assert [(r["partition"], r["offset"]) for r in d.in_flight_records] == [(0, 8)]
    assert d.buckets[("t", 0)] == diff.BucketDiff(missing=1, duplicated=2, unexpected=1)
    assert d.buckets[("t", bucket)] == diff.BucketDiff(missing=1)
    assert d.buckets[("t", grace_from)] == diff.BucketDiff(in_flight=1, in_flight_target=1)


def test_key_text_is_printable_and_bounded():
    assert diff.key_text(None) is None
    assert diff.key_text(b"order-1") == "order-1"
    assert diff.key_text(b"\xff\x00a") == "\\xff\x00a"
    assert diff.key_text(b"x" * 100) == "x" * 80 + "..."


# ------------------------------------------------------------------------------------------ report


def build(rows, groups, *, spans=(), max_listed=100, bucket=10 * MIN, grace_from=None):
    ctx = report.Context(
        source="src:9092",
        target="tgt:9092",
        topics_regex="t.*",
        from_ms=None,
        to_ms=None,
        bucket_ms=bucket,
        grace_ms=5 * MIN,
        now_ms=NOW,
        spans=spans,
        max_listed=max_listed,
    )
    grace_from = NOW - 5 * MIN if grace_from is None else grace_from
    return report.build(ctx, compare_sums(rows), classify(groups, bucket, grace_from))


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


def test_command_refuses_bad_options_in_one_line_before_any_cluster_or_spark(tmp_path, capsys):
    from kmirror import cli

    files = []
    for name in ("source", "target"):
        files.append(tmp_path / f"{name}.properties")
        files[-1].write_text("bootstrap.servers=127.0.0.1:1\n")
    base = ["audit", "--source.config", str(files[0]), "--target.config", str(files[1])]
    out = str(tmp_path / "out")
    cases = [
        (["--topics", "orders", "--exclude", "(", "--output", out], "--blacklist"),
        (["--topics", "orders", "--from", "-1h", "--to", "-2h", "--output", out], "--from must be before"),
        (["--topics", "orders", "--grace", "5", "--output", out], "--grace"),
        (["--topics", "orders", "--conf", "novalue", "--output", out], "KEY=VALUE"),
    ]
    for args, expected in cases:
        assert cli.main([*base, *args]) == report.EXIT_ERROR
        err = capsys.readouterr().err
        assert err.startswith("kmirror audit: error: ") and err.count("\n") == 1, err
        assert expected in err
    assert not (tmp_path / "out").exists()


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


def test_default_cluster_names_follow_the_ansible_layout(tmp_path):
    east = tmp_path / "east"
    assert job.default_name(str(east / "consumer.properties"), "consumer", None) == "east"
    assert job.default_name(str(east / "producer.properties"), "producer", "target") == "target"
    assert job.default_name(str(tmp_path / "dc1.properties"), "consumer", None) == "dc1"
