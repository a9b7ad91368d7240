"""The Grafana dashboard monitoring/grafana/kmirror.json: its structure (panels, the datasource and the source
and host variables, a PromQL expression in every target), and every metric name its queries use is one a
running `kmirror run` serves: the worker's Collector rendered without brokers, and a real scrape of a mirror
with a synced consumer group (--groups) on Apache Kafka, where the failover gauges have samples."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from mirror_harness import (
    commit_offsets,
    create_topic,
    make_records,
    mirror_worker,
    produce,
    wait_until,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kmirror.failover.groupsync import metric_families
from kmirror.mirror.metrics import Collector, Snapshot
from kmirror.testing.kafka import free_port

DASHBOARD = Path(__file__).resolve().parents[3] / "monitoring" / "grafana" / "kmirror.json"

# PromQL words that are not metric names: aggregation operators and keywords (functions are followed by '(').
PROMQL_WORDS = {
    *("sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "group"),
    *(
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
    ),
    "count_values",
}


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict) -> list[dict]:
    """Every panel, rows' collapsed children included (rows themselves hold no query)."""
    out = []
    for p in dashboard["panels"]:
        if p["type"] == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def queries(dashboard: dict) -> list[str]:
    return [t["expr"] for p in panels(dashboard) for t in p["targets"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers left once strings, label matchers
    ({...}), grouping clauses (by/without (...)), ranges ([...]), template variables, numbers, functions
    (a name followed by '(') and keywords are taken out."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\s*(\()?", e):
        name, call = m.group(1), m.group(2)
        if call is None and name not in PROMQL_WORDS:
            names.add(name)
    return names


def exported_names(text: str) -> set[str]:
    """The sample names of a Prometheus text page, also of families that have no sample yet (a counter
    NAME is served as NAME_total, a histogram as NAME_bucket/_sum/_count)."""
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
        else:
            names.add(family.name)
    return names


def test_dashboard_structure():
    d = load()
    assert d["uid"] == "kmirror" and d["title"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    for name, label in (("source", "source"), ("host", "host")):
        v = variables[name]
        assert v["type"] == "query" and v["includeAll"] and v["allValue"] == ".*"
        assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert re.fullmatch(rf"label_values\(kmirror_\w+(\{{[^}}]*\}})?, {label}\)", v["query"]["query"])
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    shown = panels(d)
    assert len(shown) >= 10
    for p in shown:
        assert p["type"] in ("timeseries", "stat"), p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], f"{p['title']}: no query"
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        for t in p["targets"]:
            assert t["expr"].strip(), f"{p['title']}: a target without a PromQL expr"
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
            # every query follows the source and host variables
            assert 'source=~"$source"' in t["expr"] and 'host=~"$host"' in t["expr"], t["expr"]
    titles = " ".join(p["title"].lower() for p in shown)
    # what the issue asks for: throughput, lag, replication latency, blocked and unassigned seconds, send
    # errors, failover checkpoint age
    for needed in (
        "records / s",
        "bytes / s",
        "lag",
        "latency",
        "blocked",
        "without partitions",
        "send errors",
        "checkpoint age",
    ):
        assert needed in titles, needed


def test_metric_names_are_parsed_from_promql():
    expr = (
        "histogram_quantile(0.99, sum by (le, source) (rate(kmirror_replication_latency_seconds_bucket"
        '{source=~"$source", host=~"$host"}[$__rate_interval]))) or vector(0) > on (x) up'
    )
    assert metric_names(expr) == {"kmirror_replication_latency_seconds_bucket", "up"}


def served_by_the_collector() -> set[str]:
    collector = Collector()
    collector.update(Snapshot("east", 0, records_in=1, partition_lag={("orders", 0): 5}))
    collector.extra.append(lambda: metric_families([]))  # the group sync's gauges, as the runner adds them
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return exported_names(generate_latest(registry).decode())


def used_by_the_dashboard() -> set[str]:
    used = set().union(*(metric_names(q) for q in queries(load())))
    assert used and all(n.startswith("kmirror_") for n in used), sorted(used)
    return used


def test_every_dashboard_metric_is_one_the_collector_serves():
    used, served = used_by_the_dashboard(), served_by_the_collector()
    assert used - served == set(), f"not served by the worker: {sorted(used - served)}"
    # the failover gauges are on the dashboard
    assert "kmirror_checkpoint_age_seconds" in used and "kmirror_replication_latency_seconds_bucket" in used


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def test_every_dashboard_metric_is_in_a_real_scrape(kafka, tmp_path, workers):
    """A mirror with a synced consumer group: each metric the dashboard queries has a sample."""
    src, tgt = kafka["source"], kafka["target"]
    create_topic(src, "watched", 2)
    produce(src, make_records("watched", 2, 50))
    # An application group that committed offsets on the source: --groups syncs it.
    commit_offsets(src, "app", {("watched", p): 20 for p in range(2)})
    port = free_port()
    w = mirror_worker(
        tmp_path,
        src,
        tgt,
        "watched",
        1,
        "--groups",
        "app",
        "--sync.group.offsets.interval.ms",
        "500",
        "--metrics.port",
        str(port),
    )
    workers.append(w)
    w.wait_for("metrics on http://")
    used = used_by_the_dashboard()

    def missing() -> set[str]:
        text = scrape(port)
        have = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        return used - have

    wait_until(lambda: not missing(), timeout=90, what="a sample of every metric the dashboard queries")
    assert w.stop() == 0
