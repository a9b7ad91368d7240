"""The audit report, pure: report.json's content, the exit code, and a self-contained HTML page with an
inline SVG chart of completeness per time bucket (no external assets, no scripts)."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from kmirror.audit.diff import BucketDiff, Differences, Phase1
from kmirror.audit.gaps import SourceGaps, gap_row
from kmirror.audit.scope import SOURCE, TARGET, Span, iso

FORMAT_VERSION = 1
EXIT_COMPLETE = 0
EXIT_DIFFERENT = 1
EXIT_ERROR = 2
_COUNTS = ("missing", "duplicated", "unexpected", "in_flight", "in_flight_target")
_LISTS = ("missing_records", "duplicated_records", "unexpected_records", "in_flight_records")


@dataclass
class Context:
    """What the report says about how the audit ran."""

    source: str
    target: str
    topics_regex: str
    from_ms: int | None
    to_ms: int | None
    bucket_ms: int
    grace_ms: int
    now_ms: int
    spans: Sequence[Span] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    spark: Mapping[str, str] = field(default_factory=dict)
    max_listed: int = 1_000_000
    exclude_regex: str | None = None
    source_name: str = "source"
    target_name: str = "target"
    source_gaps: SourceGaps | None = None  # the mirror's gaps in the window (kmirror.audit.gaps)


def exit_code(report: Mapping[str, object]) -> int:
    """0 complete; 1 when records are missing or duplicated, or were lost on the source before the mirror
    copied them (a source gap: the target lacks them too); unexpected target records are reported but do
    not fail the audit (other producers may write to the target)."""
    totals: Mapping[str, int] = report["totals"]  # type: ignore[assignment]
    bad = totals["missing"] or totals["duplicated"] or totals.get("lost_in_gaps", 0)
    return EXIT_DIFFERENT if bad else EXIT_COMPLETE


def _human_ms(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def build(ctx: Context, phase1: Phase1, diffs: Differences) -> dict[str, object]:
    per_bucket: dict[tuple[str, int], dict[str, object]] = {}
    for (topic, bucket, _fly), sums in sorted(phase1.units.items()):
        b = per_bucket.setdefault(
            (topic, bucket),
            {
                "topic": topic,
                "start": iso(bucket),
                "start_ms": bucket,
                "source_records": 0,
                "target_records": 0,
                "checksums_match": True,
            },
        )
        b["source_records"] += sums.source_records  # type: ignore[operator]
        b["target_records"] += sums.target_records  # type: ignore[operator]
        b["checksums_match"] = b["checksums_match"] and (topic, bucket, _fly) not in phase1.differing
    warnings = []
    for key, b in per_bucket.items():
        d = diffs.buckets.get(key, BucketDiff())
        for name in _COUNTS:
            b[name] = getattr(d, name)
        src_n: int = b["source_records"]  # type: ignore[assignment]
        b["completeness"] = round((src_n - d.missing - d.in_flight) / src_n, 6) if src_n else None
        if not b["checksums_match"] and not any(getattr(d, n) for n in _COUNTS):
            warnings.append(
                f"{key[0]} bucket {iso(key[1])}: the content hashes differed but no record could be "
                "named (records removed by retention while the audit read them)"
            )
    buckets = sorted(per_bucket.values(), key=lambda b: (b["topic"], b["start_ms"]))

    topics: dict[str, dict[str, object]] = {}
    span_topics = sorted({s.topic for s in ctx.spans})
    for t in span_topics:
        topics[t] = _zero(t)
    for b in buckets:
        row = topics.setdefault(str(b["topic"]), _zero(str(b["topic"])))
        for name in ("source_records", "target_records", *_COUNTS):
            row[name] += b[name]  # type: ignore[operator]
        row["buckets"] += 1  # type: ignore[operator]
        row["buckets_differing"] += 0 if b["checksums_match"] else 1  # type: ignore[operator]
    found = ctx.source_gaps or SourceGaps(None)
    gaps = [gap_row(g) for g in found.gaps]
    for g in found.gaps:
        row = topics.setdefault(g.topic, _zero(g.topic))
        if g.lost:
            row["lost_in_gaps"] += g.last - g.first + 1  # type: ignore[operator]
    if found.error is not None:
        warnings.append(f"source gaps {found.as_dict()['status']}")
    totals = _zero(None)
    del totals["topic"]
    for row in topics.values():
        for name in totals:
            totals[name] += row[name]  # type: ignore[operator]

    remirror = remirror_ranges(diffs.missing_records)
    listed: dict[str, object] = {}
    truncated = {}
    for name in _LISTS:
        records = getattr(diffs, name)
        listed[name] = records[: ctx.max_listed]
        truncated[name] = len(records) > ctx.max_listed

    report: dict[str, object] = {
        "format": FORMAT_VERSION,
        "generated_at": iso(ctx.now_ms),
        "window": {
            "from": iso(ctx.from_ms),
            "to": iso(ctx.to_ms),
            "from_ms": ctx.from_ms,
            "to_ms": ctx.to_ms,
            "bucket": _human_ms(ctx.bucket_ms),
            "bucket_ms": ctx.bucket_ms,
            "grace": _human_ms(ctx.grace_ms),
            "in_flight_from": iso(ctx.now_ms - ctx.grace_ms),
        },
        "topics_regex": ctx.topics_regex,
        "exclude_regex": ctx.exclude_regex,
        "clusters": {
            name: {
                "name": alias,
                "bootstrap": bootstrap,
                "partitions": len({(s.topic, s.partition) for s in ctx.spans if s.side == side}),
                "offsets_planned": sum(s.size for s in ctx.spans if s.side == side),
            }
            for side, name, alias, bootstrap in (
                (SOURCE, "source", ctx.source_name, ctx.source),
                (TARGET, "target", ctx.target_name, ctx.target),
            )
        },
        "totals": totals,
        "topics": list(topics.values()),
        "buckets": buckets,
        **listed,
        "truncated": truncated,
        "remirror": remirror,
        "gaps": gaps,
        "source_gaps": found.as_dict(),
        "warnings": warnings,
        "timings_s": {k: round(v, 3) for k, v in ctx.timings.items()},
        "spark": dict(ctx.spark),
    }
    code = exit_code(report)
    report["exit_code"] = code
    report["verdict"] = "complete" if code == EXIT_COMPLETE else "incomplete"
    report["summary"] = summary(report)
    report["next_steps"] = next_steps(report, diffs)
    return report


def remirror_ranges(missing: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Per source partition with missing records: the offsets to copy again (first to last missing,
    inclusive), how many of them are missing, and their timestamps."""
    by_partition: dict[tuple[str, int], list[Mapping[str, object]]] = defaultdict(list)
    for r in missing:
        by_partition[(str(r["topic"]), cast(int, r["partition"]))].append(r)
    out = []
    for (topic, partition), records in sorted(by_partition.items()):
        offsets = [cast(int, r["offset"]) for r in records]
        stamps = [cast(int, r["timestamp"]) for r in records]
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "from_offset": min(offsets),
                "to_offset": max(offsets),
                "missing": len(records),
                "first_timestamp": iso(min(stamps)),
                "last_timestamp": iso(max(stamps)),
            }
        )
    return out


def _span_of(records: Sequence[Mapping[str, object]]) -> str:
    stamps = [cast(int, r["timestamp"]) for r in records]
    first, last = iso(min(stamps)), iso(max(stamps))
    return f"at {first}" if first == last else f"from {first} to {last}"


def next_steps(report: Mapping[str, object], diffs: Differences) -> list[str]:
    """What the operator does next, one sentence each: which source ranges to copy again and where to
    look for the cause of missing or duplicated records; nothing to do when complete."""
    t: Mapping[str, int] = report["totals"]  # type: ignore[assignment]
    clusters: Mapping[str, Mapping[str, object]] = report["clusters"]  # type: ignore[assignment]
    src, tgt = clusters["source"]["name"], clusters["target"]["name"]
    steps = []
    ranges = cast(Sequence[Mapping[str, object]], report["remirror"])
    if ranges:
        shown = "; ".join(
            f"{r['topic']}/{r['partition']} offsets {r['from_offset']}-{r['to_offset']} "
            f"({r['missing']:,} missing)"
            for r in ranges[:5]
        )
        more = (
            f"; and {len(ranges) - 5:,} more partition(s) (report.json, 'remirror')"
            if len(ranges) > 5
            else ""
        )
        steps.append(
            f"Re-mirror these ranges of source {src}: {shown}{more}. Look in the mirror's log "
            f"(kmirror@{src}) for send errors, restarts and rebalances since the first missing record "
            f"({_span_of(diffs.missing_records)}); docs/health.md, 'After an incomplete audit'."
        )
    gaps = cast(Sequence[Mapping[str, object]], report.get("gaps", []))
    lost = [g for g in gaps if g["lost"]]
    if lost:
        shown = "; ".join(
            f"{g['topic']}/{g['partition']} offsets {g['first']}-{g['last']} ({g['records']:,} records, "
            f"met at {g['at']})"
            for g in lost[:5]
        )
        more = f"; and {len(lost) - 5:,} more (report.json, 'gaps')" if len(lost) > 5 else ""
        steps.append(
            f"Lost on source {src} before the mirror copied them (source gaps, not missing on the target): "
            f"{shown}{more}. They are on neither cluster: nothing to re-mirror; produce them again "
            "upstream if you can, and find why the mirror fell behind retention "
            "(docs/runbooks/source-gap.md)."
        )
    if len(lost) < len(gaps):
        steps.append(
            f"{len(gaps) - len(lost):,} source gap(s) of records no longer on source {src} that the mirror "
            "had copied before (a truncated partition or a recreated topic): not lost; records mirrored "
            "again from the log start may be duplicated (docs/runbooks/source-gap.md)."
        )
    if t["duplicated"]:
        steps.append(
            f"{t['duplicated']:,} extra copies on target {tgt} ({_span_of(diffs.duplicated_records)}): "
            "records sent again after a restart or rebalance; look in the mirror's log "
            f"(kmirror@{src}) at those times. Nothing to copy; consumers that are not idempotent "
            "read them twice."
        )
    if t["unexpected"]:
        topics = sorted({str(r["topic"]) for r in diffs.unexpected_records})
        steps.append(
            f"{t['unexpected']:,} records only on target {tgt} (topics {', '.join(topics)}): "
            "another producer writes to them there, or retention removed the source's copies before "
            "the audit read them."
        )
    if t["in_flight"]:
        steps.append(
            f"{t['in_flight']:,} recent records are not on target {tgt} yet (in flight, newer than "
            f"{cast(Mapping[str, object], report['window'])['in_flight_from']}): nothing to do while the "
            "mirror keeps up; the next audit checks them."
        )
    if not steps:
        steps.append(
            f"Nothing to do: every record of source {src} in the window is on target {tgt} exactly once."
        )
    return steps


def _zero(topic: str | None) -> dict[str, object]:
    return {
        "topic": topic,
        "source_records": 0,
        "target_records": 0,
        **dict.fromkeys(_COUNTS, 0),
        "buckets": 0,
        "buckets_differing": 0,
        "lost_in_gaps": 0,
    }


def summary(report: Mapping[str, object]) -> str:
    t: Mapping[str, int] = report["totals"]  # type: ignore[assignment]
    head = "COMPLETE" if exit_code(report) == EXIT_COMPLETE else "INCOMPLETE"
    parts = [
        f"{t['missing']:,} missing",
        f"{t['duplicated']:,} duplicated",
        f"{t['unexpected']:,} unexpected",
        f"{t['in_flight']:,} in flight",
    ]
    gaps = cast(Sequence[object], report.get("gaps", []))
    if gaps:
        parts.append(
            f"{t.get('lost_in_gaps', 0):,} lost on the source before mirroring ({len(gaps):,} source gap(s))"
        )
    ntopics = len(report["topics"])  # type: ignore[arg-type]
    return (
        f"{head}: {', '.join(parts)}; {t['source_records']:,} source and {t['target_records']:,} target "
        f"records in {ntopics} topic(s), {t['buckets']:,} bucket(s)"
    )


# ---------------------------------------------------------------------------------------------- HTML

_GREEN, _RED, _GREY, _ORANGE, _PURPLE, _AXIS = "#2e8b57", "#d62728", "#b0b0b0", "#ff8c00", "#7b3fa0", "#555"
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;
 max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 6px} .muted{color:#666}
.verdict{padding:14px 18px;border-radius:6px;color:#fff;font-size:20px;font-weight:600;margin:12px 0}
.ok{background:#2e8b57} .bad{background:#c62828}
.next{border-left:4px solid #1565c0;background:#f3f7fc;padding:8px 14px;margin:10px 0}
.next ul{margin:4px 0;padding-left:20px}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px} .card.alert b{color:#c62828} .card.warn b{color:#e65100}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4} td.l,th.l{text-align:left} .legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
"""
# Steps of the time axis's labelled ticks (ms): the smallest that gives at most _MAX_TICKS labels.
_TICK_STEPS = [
    n * unit
    for unit, ns in (
        (1000, (1, 5, 10, 15, 30)),
        (60_000, (1, 2, 5, 10, 15, 30)),
        (3_600_000, (1, 2, 3, 6, 12)),
    )
    for n in ns
] + [d * 86_400_000 for d in (1, 2, 7, 14, 30, 91, 182, 365)]
_MAX_TICKS = 8


def _e(v: object) -> str:
    return html.escape("" if v is None else str(v))


def time_ticks(first_ms: int, end_ms: int) -> tuple[int, list[int]]:
    """The step and the instants (multiples of the step, UTC) of the labelled ticks of [first, end]:
    at least two, at most _MAX_TICKS (the ends of the axis are used when no step fits)."""
    span = end_ms - first_ms
    for step in _TICK_STEPS:
        if span / step <= _MAX_TICKS:
            ticks = list(range(first_ms + (-first_ms) % step, end_ms + 1, step))
            if len(ticks) >= 2:
                return step, ticks
            break
    return span, [first_ms, end_ms]


def _tick_label(ms: int, step: int, same_day: bool) -> str:
    d = datetime.fromtimestamp(ms / 1000, UTC)
    if step >= 86_400_000:
        return d.strftime("%Y-%m-%d")
    clock = d.strftime("%H:%M:%S" if step < 60_000 else "%H:%M")
    return clock if same_day else f"{d.strftime('%m-%d')} {clock}"


def _chart(topic: str, buckets: Sequence[Mapping[str, object]], bucket_ms: int) -> str:
    """Two panels over one labelled time axis, a slot per bucket: above, the source records per bucket
    (green: on the target, grey: in flight, red: missing); below, on an axis of their own, the missing
    (red), duplicated (orange) and unexpected (purple) records per bucket, so that one missing record in
    thousands is a bar as tall as the panel's largest."""
    if not buckets:
        return '<p class="muted">no records in the window</p>'
    first: int = buckets[0]["start_ms"]  # type: ignore[assignment]
    last: int = buckets[-1]["start_ms"]  # type: ignore[assignment]
    n = (last - first) // bucket_ms + 1
    width, left, top, h_rec, gap, h_bad = 960, 78, 8, 90, 14, 56
    rec_y, bad_y = top, top + h_rec + gap
    axis_y = bad_y + h_bad
    height = axis_y + 36
    slot = width / n
    bar = max(1.0, slot * 0.85)
    max_rec = max(max(int(b["source_records"]), int(b["target_records"])) for b in buckets)  # type: ignore[call-overload]
    max_bad = max(int(b["missing"]) + int(b["duplicated"]) + int(b["unexpected"]) for b in buckets)  # type: ignore[call-overload]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width + left + 20}" height="{height}" '
        f'aria-label="records of {_e(topic)} per bucket: on the target, missing, duplicated, unexpected">',
        f'<text x="{left - 8}" y="{rec_y + 10}" font-size="11" text-anchor="end">{max_rec:,}</text>',
        f'<text x="{left - 8}" y="{rec_y + h_rec}" font-size="11" text-anchor="end">0</text>',
        f'<text x="{left - 8}" y="{rec_y + h_rec / 2 + 4}" font-size="10" text-anchor="end" fill="#666">'
        "records</text>",
        f'<line x1="{left}" y1="{rec_y}" x2="{left}" y2="{rec_y + h_rec}" stroke="{_AXIS}"/>',
        f'<line x1="{left}" y1="{rec_y + h_rec}" x2="{left + width}" y2="{rec_y + h_rec}" stroke="{_AXIS}"/>',
        f'<line x1="{left}" y1="{bad_y}" x2="{left}" y2="{axis_y}" stroke="{_AXIS}"/>',
        f'<text x="{left - 8}" y="{axis_y}" font-size="11" text-anchor="end">0</text>',
        f'<text x="{left - 8}" y="{bad_y + h_bad / 2 + 4}" font-size="10" text-anchor="end" fill="#666">'
        "missing/extra</text>",
    ]
    if max_bad:
        parts.append(
            f'<text class="bad-max" x="{left - 8}" y="{bad_y + 10}" font-size="11" text-anchor="end">'
            f"{max_bad:,}</text>"
        )
    else:
        parts.append(
            f'<text x="{left + width / 2}" y="{bad_y + h_bad / 2 + 4}" font-size="12" text-anchor="middle" '
            f'fill="{_GREEN}">no record missing, duplicated or unexpected</text>'
        )
    for b in buckets:
        x = left + ((b["start_ms"] - first) // bucket_ms) * slot + (slot - bar) / 2  # type: ignore[operator]
        src: int = b["source_records"]  # type: ignore[assignment]
        missing: int = b["missing"]  # type: ignore[assignment]
        fly: int = b["in_flight"]  # type: ignore[assignment]
        tip = (
            f"{b['start']}: {src:,} source, {b['target_records']:,} target, {missing:,} missing, "
            f"{b['duplicated']:,} duplicated, {b['unexpected']:,} unexpected, {fly:,} in flight"
        )
        parts.append(f'<g data-bucket="{_e(b["start"])}"><title>{_e(tip)}</title>')
        if src:
            y = float(rec_y + h_rec)
            for count, colour, cls in ((src - missing - fly, _GREEN, "copied"), (fly, _GREY, "in-flight"),
                                       (missing, _RED, "missing")):  # fmt: skip
                if count > 0:
                    h = h_rec * count / max_rec
                    y -= h
                    parts.append(
                        f'<rect class="{cls}" x="{x:.2f}" y="{y:.2f}" width="{bar:.2f}" height="{h:.2f}" '
                        f'fill="{colour}"/>'
                    )
        else:
            h = h_rec * int(b["target_records"]) / max_rec  # type: ignore[call-overload]
            parts.append(
                f'<rect class="target-only" x="{x:.2f}" y="{rec_y + h_rec - h:.2f}" width="{bar:.2f}" '
                f'height="{h:.2f}" fill="{_PURPLE}" fill-opacity="0.35"/>'
            )
        y = float(axis_y)
        for kind, colour in (("missing", _RED), ("duplicated", _ORANGE), ("unexpected", _PURPLE)):
            count = int(b[kind])  # type: ignore[call-overload]
            if count:
                h = max(2.0, h_bad * count / max_bad)
                y -= h
                parts.append(
                    f'<rect class="{kind}-count" data-count="{count}" x="{x:.2f}" y="{y:.2f}" '
                    f'width="{bar:.2f}" height="{h:.2f}" fill="{colour}"/>'
                )
        parts.append("</g>")
    end = first + n * bucket_ms
    step, ticks = time_ticks(first, end)
    same_day = iso(first)[:10] == iso(end - 1)[:10]  # type: ignore[index]
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" stroke="{_AXIS}"/>')
    for ms in ticks:
        x = left + (ms - first) / (end - first) * width
        anchor = "start" if ms == first else "end" if ms == end else "middle"
        parts.append(
            f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 4}" stroke="{_AXIS}"/>'
            f'<text class="tick" data-ms="{ms}" x="{x:.2f}" y="{axis_y + 16}" font-size="11" '
            f'text-anchor="{anchor}">{_e(_tick_label(ms, step, same_day))}</text>'
        )
    day = iso(first)[:10] if same_day else f"{iso(first)[:10]} to {iso(end - 1)[:10]}"  # type: ignore[index]
    parts.append(
        f'<text x="{left + width / 2}" y="{axis_y + 32}" font-size="11" text-anchor="middle" fill="#666">'
        f"record timestamp, UTC, {day}: {n} bucket(s) of {_human_ms(bucket_ms)}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _records_table(title: str, listed: object, limit: int = 200) -> str:
    records = cast(Sequence[Mapping[str, object]], listed)
    if not records:
        return ""
    cols = ["topic", "partition", "offset", "timestamp", "key"]
    extra = [c for c in ("copies", "source_copies") if c in records[0]]
    head = "".join(f'<th class="{"l" if c in ("topic", "key") else ""}">{_e(c)}</th>' for c in cols + extra)
    rows = []
    for r in records[:limit]:
        cells = []
        for c in cols + extra:
            v = iso(r[c]) + f" ({r[c]})" if c == "timestamp" else r.get(c)  # type: ignore[operator, arg-type]
            cells.append(f'<td class="{"l" if c in ("topic", "key") else ""}">{_e(v)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f'<p class="muted">first {limit} of {len(records):,}; all in report.json</p>'
        if len(records) > limit
        else ""
    )
    return f"<h2>{_e(title)} ({len(records):,})</h2><table><tr>{head}</tr>{''.join(rows)}</table>{more}"


def _in_flight_table(report: Mapping[str, object]) -> str:
    """The in-flight records (harmless while the mirror keeps up) as one summary row, not one row each."""
    records = cast(Sequence[Mapping[str, object]], report["in_flight_records"])
    total = cast(Mapping[str, int], report["totals"])["in_flight"]
    if not total:
        return ""
    w = cast(Mapping[str, object], report["window"])
    topics = sorted({str(r["topic"]) for r in records})
    partitions = len({(r["topic"], r["partition"]) for r in records})
    stamps = [cast(int, r["timestamp"]) for r in records]
    span = f"{iso(min(stamps))} &ndash; {iso(max(stamps))}" if stamps else ""
    return (
        f'<h2 id="in-flight">In flight ({total:,})</h2>'
        '<table class="in-flight"><tr><th>records</th><th class="l">topics</th><th>partitions</th>'
        '<th class="l">timestamps</th><th class="l">why not missing</th></tr>'
        f'<tr><td>{total:,}</td><td class="l">{_e(", ".join(topics))}</td><td>{partitions:,}</td>'
        f'<td class="l">{span}</td><td class="l">newer than {_e(w["in_flight_from"])} (--grace '
        f"{_e(w['grace'])}): the mirror may not have copied them yet; each is listed in report.json"
        "</td></tr></table>"
    )


def _gaps_table(report: Mapping[str, object]) -> str:
    """The mirror's source gaps in the window (kmirror.audit.gaps): not missing records."""
    gaps = cast(Sequence[Mapping[str, object]], report.get("gaps", []))
    if not gaps:
        return ""
    rows = "".join(
        f'<tr><td class="l">{_e(g["topic"])}</td><td>{g["partition"]}</td><td>{g["first"]}</td>'
        f'<td>{g["last"]}</td><td>{g["records"]:,}</td><td class="l">{_e(g["kind"])}</td>'
        f'<td class="l">{_e(g["at"])}</td></tr>'
        for g in gaps
    )
    return (
        f'<h2 id="gaps">Gaps in the source ({len(gaps):,})</h2>'
        '<p class="muted">Ranges the mirror could not copy because the source no longer had them, as it '
        "recorded them on the target: <i>lost</i> records were purged before they were copied and are on "
        "neither cluster (not counted as missing); docs/runbooks/source-gap.md.</p>"
        '<table class="gaps"><tr><th class="l">topic</th><th>partition</th><th>first offset</th>'
        '<th>last offset</th><th>records</th><th class="l">kind</th><th class="l">met at</th></tr>'
        f"{rows}</table>"
    )


def _excluded(report: Mapping[str, object]) -> str:
    ex = report.get("exclude_regex")
    return f" except <code>{_e(ex)}</code>" if ex else ""


def render_html(report: Mapping[str, object]) -> str:
    t: Mapping[str, int] = report["totals"]  # type: ignore[assignment]
    w: Mapping[str, object] = report["window"]  # type: ignore[assignment]
    ok = report["exit_code"] == EXIT_COMPLETE
    cards = []
    for name, label in (
        ("source_records", "source records"),
        ("target_records", "target records"),
        ("missing", "missing"),
        ("duplicated", "duplicated"),
        ("unexpected", "unexpected"),
        ("in_flight", "in flight"),
    ):
        cls = (
            "alert"
            if name in ("missing", "duplicated") and t[name]
            else "warn"
            if name == "unexpected" and t[name]
            else ""
        )
        cards.append(f'<div class="card {cls}"><b>{t[name]:,}</b>{label}</div>')
    if report.get("gaps"):
        cls = "alert" if t.get("lost_in_gaps") else ""
        cards.append(
            f'<div class="card {cls}"><b>{t.get("lost_in_gaps", 0):,}</b>lost before mirroring</div>'
        )
    by_topic: dict[str, list[Mapping[str, object]]] = defaultdict(list)
    for b in report["buckets"]:  # type: ignore[attr-defined]
        by_topic[b["topic"]].append(b)
    topic_rows = []
    charts = []
    for row in report["topics"]:  # type: ignore[attr-defined]
        name = row["topic"]
        bad = row["missing"] or row["duplicated"] or row.get("lost_in_gaps")
        topic_rows.append(
            f'<tr><td class="l">{_e(name)}</td><td>{row["source_records"]:,}</td>'
            f"<td>{row['target_records']:,}</td>"
            f"<td>{row['missing']:,}</td><td>{row['duplicated']:,}</td><td>{row['unexpected']:,}</td>"
            f"<td>{row['in_flight']:,}</td><td>{row['buckets_differing']:,} / {row['buckets']:,}</td>"
            f'<td class="l">{"&#10007; incomplete" if bad else "&#10003; complete"}</td></tr>'
        )
        charts.append(f"<h2>{_e(name)}</h2>" + _chart(name, by_topic.get(name, []), int(w["bucket_ms"])))  # type: ignore[call-overload]
    legend = (
        '<p class="legend">'
        f'<span><i class="sw" style="background:{_GREEN}"></i>on the target</span>'
        f'<span><i class="sw" style="background:{_GREY}"></i>in flight '
        f"(less than {_e(w['grace'])} old)</span>"
        f'<span><i class="sw" style="background:{_RED}"></i>missing</span>'
        f'<span><i class="sw" style="background:{_ORANGE}"></i>duplicated</span>'
        f'<span><i class="sw" style="background:{_PURPLE}"></i>unexpected (only on the target)</span>'
        '</p><p class="muted">Above: records per bucket. Below, on an axis of their own: the missing, '
        "duplicated and unexpected records per bucket.</p>"
    )
    warnings = "".join(f"<li>{_e(x)}</li>" for x in report.get("warnings", []))  # type: ignore[attr-defined]
    clusters: Mapping[str, Mapping[str, object]] = report["clusters"]  # type: ignore[assignment]
    steps = "".join(f"<li>{_e(x)}</li>" for x in report.get("next_steps", []))  # type: ignore[attr-defined]
    src, tgt = clusters["source"], clusters["target"]
    title = f"kmirror audit of {src.get('name')}: {'complete' if ok else 'INCOMPLETE'}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<style>{_CSS}</style></head><body>
<h1>kmirror audit: {_e(src.get("name"))} &rarr; {_e(tgt.get("name"))}</h1>
<div class="muted">generated {_e(report["generated_at"])};
source <b class="cluster">{_e(src.get("name"))}</b> ({src["partitions"]:,} partitions) &rarr;
target <b class="cluster">{_e(tgt.get("name"))}</b> ({tgt["partitions"]:,} partitions);
topics <code>{_e(report["topics_regex"])}</code>{_excluded(report)};
window {_e(w["from"] or "start of the logs")} &ndash; {_e(w["to"] or "end of the logs")};
buckets of {_e(w["bucket"])}; records after {_e(w["in_flight_from"])} count as in flight</div>
<div class="verdict {"ok" if ok else "bad"}">{_e(report["summary"])}</div>
<div class="next" id="what-next"><b>What next</b><ul>{steps}</ul></div>
<div class="cards">{"".join(cards)}</div>
{f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else ""}
<h2>Topics</h2>
<table><tr><th class="l">topic</th><th>source</th><th>target</th><th>missing</th><th>duplicated</th>
<th>unexpected</th><th>in flight</th><th>buckets differing</th><th class="l">verdict</th></tr>
{"".join(topic_rows)}</table>
<h2>Records per bucket</h2>{legend}
{"".join(charts)}
{_records_table("Missing records (source partition and offset)", report["missing_records"])}
{_records_table("Duplicated records (extra copies: target partition, offset)", report["duplicated_records"])}
{_records_table("Unexpected records (target partition and offset)", report["unexpected_records"])}
{_gaps_table(report)}
{_in_flight_table(report)}
</body></html>
"""
