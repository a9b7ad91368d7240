"""kmirror.audit.scope: planning offset ranges into tasks, buckets, durations, times, the output directory."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

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

from .rows import MIN, NOW

pytestmark = pytest.mark.audit

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
