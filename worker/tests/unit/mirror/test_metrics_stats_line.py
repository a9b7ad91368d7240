"""docs/health.md shows the stats line each stream logs; the line the worker's formatter writes matches it.

The documented line is read from the doc and turned into a pattern (``<source>``, ``<stream>`` and each
``...`` stand for one value), so a change of the formatter or of the doc without the other fails here. The
integration test ``test_metrics.py`` matches a line of a real ``kmirror run`` log against the same pattern.
"""

from __future__ import annotations

import re
from pathlib import Path

from kmirror.config.filters import TopicFilter
from kmirror.mirror import metrics
from kmirror.mirror.spec import StreamSpec

HEALTH_MD = Path(__file__).resolve().parents[4] / "docs/health.md"


def documented_stats_line() -> str:
    """The stats line as docs/health.md shows it (the backquoted text holding ': stats ')."""
    lines = re.findall(r"`([^`]*: stats [^`]*)`", HEALTH_MD.read_text(encoding="utf-8"))
    assert len(lines) == 1, f"docs/health.md should show the stats line once: {lines}"
    return lines[0]


def documented_pattern() -> re.Pattern[str]:
    parts = re.split(r"(<source>|<stream>|\.\.\.)", documented_stats_line())
    values = {"<source>": r"[A-Za-z0-9_.-]+", "<stream>": r"\d+", "...": r"\d+"}
    return re.compile("".join(values.get(p, re.escape(p)) for p in parts))


def test_the_formatters_line_is_the_documented_one() -> None:
    spec = StreamSpec("east", 1, {}, {}, TopicFilter(".*", None))
    first = metrics.Snapshot(source=spec.source, stream=spec.index, taken=100.0)
    second = metrics.Snapshot(
        source=spec.source,
        stream=spec.index,
        records_in=1500,
        records_out=1400,
        commits=3,
        send_errors=0,
        queue_depth=100,
        partition_lag={("orders", 0): 7, ("orders", 1): 5},
        taken=130.0,
    )
    line = metrics.stats_line(spec.label, second, first)
    assert documented_pattern().fullmatch(line), (line, documented_stats_line())
    # The values are the snapshot's, in the documented order.
    assert re.findall(r"\d+", line.split(": stats ", 1)[1]) == [
        "1500",
        "1400",
        "50",
        "12",
        "100",
        "3",
        "0",
        "0",
        "0",
    ]


def test_the_pattern_refuses_another_format() -> None:
    pattern = documented_pattern()
    assert not pattern.fullmatch("east/1: stats in=1 out=1 rate=0/s lag=0 queue=0 commits=0 send_errors=0")
    assert not pattern.fullmatch("east#1: stats in=1 out=1 lag=0 queue=0 commits=0 send_errors=0")
