"""The audit report, pure: report.json's content, the exit code, and a self-contained HTML page with an
inline SVG chart of completeness per time bucket (no external assets, no scripts)."""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from kmirror.audit.diff import BucketDiff, Differences, Phase1
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


def exit_code(report: Mapping[str, object]) -> int:
    """0 complete; 1 when records are missing or duplicated (unexpected target records are reported
    but do not fail the audit: other producers may write to the target)."""
    totals: Mapping[str, int] = report["totals"]  # type: ignore[assignment]
    return EXIT_DIFFERENT if totals["missing"] or totals["duplicated"] else EXIT_COMPLETE


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
    totals = _zero(None)
    del totals["topic"]
    for row in topics.values():
        for name in totals:
            totals[name] += row[name]  # type: ignore[operator]

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
                "bootstrap": bootstrap,
                "partitions": len({(s.topic, s.partition) for s in ctx.spans if s.side == side}),
                "offsets_planned": sum(s.size for s in ctx.spans if s.side == side),
            }
            for side, name, bootstrap in ((SOURCE, "source", ctx.source), (TARGET, "target", ctx.target))
        },
        "totals": totals,
        "topics": list(topics.values()),
        "buckets": buckets,
        **listed,
        "truncated": truncated,
        "warnings": warnings,
        "timings_s": {k: round(v, 3) for k, v in ctx.timings.items()},
        "spark": dict(ctx.spark),
    }
    code = exit_code(report)
    report["exit_code"] = code
    report["verdict"] = "complete" if code == EXIT_COMPLETE else "incomplete"
    report["summary"] = summary(report)
    return report


def _zero(topic: str | None) -> dict[str, object]:
    return {
        "topic": topic,
        "source_records": 0,
        "target_records": 0,
        **dict.fromkeys(_COUNTS, 0),
        "buckets": 0,
        "buckets_differing": 0,
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
    ntopics = len(report["topics"])  # type: ignore[arg-type]
    return (
        f"{head}: {', '.join(parts)}; {t['source_records']:,} source and {t['target_records']:,} target "
        f"records in {ntopics} topic(s), {t['buckets']:,} bucket(s)"
    )


# ---------------------------------------------------------------------------------------------- HTML

_GREEN, _RED, _GREY, _ORANGE, _AXIS = "#2e8b57", "#d62728", "#b0b0b0", "#ff8c00", "#555"
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;
 max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 6px} .muted{color:#666}
.verdict{padding:14px 18px;border-radius:6px;color:#fff;font-size:20px;font-weight:600;margin:12px 0}
.ok{background:#2e8b57} .bad{background:#c62828}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px} .card.alert b{color:#c62828} .card.warn b{color:#e65100}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4} td.l,th.l{text-align:left} .legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
"""


def _e(v: object) -> str:
    return html.escape("" if v is None else str(v))


def _segments(src: int, missing: int, in_flight: int, height: float) -> list[tuple[float, str]]:
    """Heights of the red (missing), grey (in flight) and green (on the target) parts of a bar; a part
    that is not empty stays visible (at least 3 px) however small its share."""
    parts = []
    for count, colour in ((missing, _RED), (in_flight, _GREY)):
        if count:
            parts.append((max(3.0, height * count / src), colour))
    rest = height - sum(h for h, _ in parts)
    if src - missing - in_flight > 0:
        parts.append((max(0.0, rest), _GREEN))
    return parts


def _chart(topic: str, buckets: Sequence[Mapping[str, object]], bucket_ms: int) -> str:
    """Bars per bucket, as % of the source records: green = on the target, red = missing, grey = in
    flight; a red mark above a bar that misses records, an orange one above a bar with duplicated or
    unexpected records; the completeness written above incomplete bars when there is room."""
    if not buckets:
        return '<p class="muted">no records in the window</p>'
    first: int = buckets[0]["start_ms"]  # type: ignore[assignment]
    last: int = buckets[-1]["start_ms"]  # type: ignore[assignment]
    n = (last - first) // bucket_ms + 1
    width, height, left, top, bottom = 960, 130, 44, 30, 34
    slot = width / n
    bar = max(1.0, slot * 0.85)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width + left + 10}" '
        f'height="{top + height + bottom}" aria-label="completeness of {_e(topic)} per bucket">',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="{_AXIS}"/>',
        f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" stroke="{_AXIS}"/>',
        f'<text x="{left - 6}" y="{top + 4}" font-size="11" text-anchor="end">100%</text>',
        f'<text x="{left - 6}" y="{top + height / 2 + 4}" font-size="11" text-anchor="end">50%</text>',
        f'<text x="{left - 6}" y="{top + height}" font-size="11" text-anchor="end">0%</text>',
        f'<line x1="{left}" y1="{top + height / 2}" x2="{left + width}" y2="{top + height / 2}" '
        'stroke="#e5e5e5"/>',
    ]
    for b in buckets:
        x = left + ((b["start_ms"] - first) // bucket_ms) * slot + (slot - bar) / 2  # type: ignore[operator]
        src: int = b["source_records"]  # type: ignore[assignment]
        missing: int = b["missing"]  # type: ignore[assignment]
        tip = (
            f"{b['start']}: {src:,} source, {b['target_records']:,} target, {missing:,} missing, "
            f"{b['duplicated']:,} duplicated, {b['unexpected']:,} unexpected, {b['in_flight']:,} in flight"
        )
        parts.append(f"<g><title>{_e(tip)}</title>")
        if src:
            y = float(top)
            for h, colour in _segments(src, missing, b["in_flight"], height):  # type: ignore[arg-type]
                parts.append(
                    f'<rect x="{x:.2f}" y="{y:.2f}" width="{bar:.2f}" height="{h:.2f}" fill="{colour}"/>'
                )
                y += h
        else:
            parts.append(
                f'<rect x="{x:.2f}" y="{top}" width="{bar:.2f}" height="{height}" fill="{_ORANGE}" '
                'fill-opacity="0.35"/>'
            )
        marks = [c for c, on in ((_RED, missing), (_ORANGE, b["duplicated"] or b["unexpected"])) if on]
        cx = x + bar / 2 - 6 * (len(marks) - 1)
        for colour in marks:
            parts.append(
                f'<path d="M{cx - 5:.2f},{top - 11} L{cx + 5:.2f},{top - 11} L{cx:.2f},{top - 2} Z" '
                f'fill="{colour}"/>'
            )
            cx += 12
        if missing and slot >= 40:  # room for a label
            pct = math.floor(10_000 * (src - missing - b["in_flight"]) / src) / 100  # type: ignore[operator]
            parts.append(
                f'<text x="{x + bar / 2:.2f}" y="{top - 15}" font-size="10" text-anchor="middle" '
                f'fill="{_RED}">{pct:.2f}%</text>'
            )
        parts.append("</g>")
    for ms, anchor in ((first, "start"), (last, "end")) if n > 1 else ((first, "start"),):
        x = left if anchor == "start" else left + width
        parts.append(
            f'<text x="{x}" y="{top + height + 16}" font-size="11" text-anchor="{anchor}">'
            f"{_e(iso(ms))}</text>"
        )
    parts.append(
        f'<text x="{left + width / 2}" y="{top + height + 30}" font-size="11" text-anchor="middle" '
        f'fill="#666">{n} bucket(s) of {_human_ms(bucket_ms)}</text>'
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
    by_topic: dict[str, list[Mapping[str, object]]] = defaultdict(list)
    for b in report["buckets"]:  # type: ignore[attr-defined]
        by_topic[b["topic"]].append(b)
    topic_rows = []
    charts = []
    for row in report["topics"]:  # type: ignore[attr-defined]
        name = row["topic"]
        bad = row["missing"] or row["duplicated"]
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
        f'<span><i class="sw" style="background:{_RED}"></i>missing</span>'
        f'<span><i class="sw" style="background:{_GREY}"></i>in flight '
        f"(less than {_e(w['grace'])} old)</span>"
        f'<span><i class="sw" style="background:{_ORANGE}"></i>duplicated or unexpected records</span>'
        "</p>"
    )
    warnings = "".join(f"<li>{_e(x)}</li>" for x in report.get("warnings", []))  # type: ignore[attr-defined]
    clusters: Mapping[str, Mapping[str, object]] = report["clusters"]  # type: ignore[assignment]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kmirror audit: {"complete" if ok else "INCOMPLETE"}</title>
<style>{_CSS}</style></head><body>
<h1>kmirror audit</h1>
<div class="muted">generated {_e(report["generated_at"])};
source {_e(clusters["source"]["bootstrap"])} &rarr; target {_e(clusters["target"]["bootstrap"])};
topics <code>{_e(report["topics_regex"])}</code>{_excluded(report)};
window {_e(w["from"] or "start of the logs")} &ndash; {_e(w["to"] or "end of the logs")};
buckets of {_e(w["bucket"])}; records after {_e(w["in_flight_from"])} count as in flight</div>
<div class="verdict {"ok" if ok else "bad"}">{_e(report["summary"])}</div>
<div class="cards">{"".join(cards)}</div>
{f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else ""}
<h2>Topics</h2>
<table><tr><th class="l">topic</th><th>source</th><th>target</th><th>missing</th><th>duplicated</th>
<th>unexpected</th><th>in flight</th><th>buckets differing</th><th class="l">verdict</th></tr>
{"".join(topic_rows)}</table>
<h2>Completeness per bucket</h2>{legend}
{"".join(charts)}
{_records_table("Missing records (source partition and offset)", report["missing_records"])}
{_records_table("Duplicated records (extra copies: target partition, offset)", report["duplicated_records"])}
{_records_table("Unexpected records (target partition and offset)", report["unexpected_records"])}
{_records_table("In flight (source partition and offset)", report["in_flight_records"])}
</body></html>
"""
