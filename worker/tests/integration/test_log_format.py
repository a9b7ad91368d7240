"""`kmirror run --log.format json`: every line the mirror writes, the supervisor's and each stream
process's, librdkafka's included, is one JSON object a log shipper can read, on a real mirror
(Apache Kafka 4.3 source and target)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import mirror_harness as mh

from kmirror.testing.kafka import KafkaCluster

FIELDS = {"time", "level", "process", "logger", "message"}


def test_json_logs_of_a_whole_run(tmp_path: Path, kafka: dict[str, KafkaCluster]) -> None:
    src, tgt = kafka["source"], kafka["target"]
    topic = "logs.json"
    mh.create_topic(src, topic, 2)
    records = mh.make_records(topic, 2, 50)
    mh.produce(src, records)
    w = mh.mirror_worker(tmp_path, src, tgt, topic, 2, "--log.format", "json", group="g-logs")
    mh.assert_mirrored(records, mh.read_all(tgt, [topic], len(records), timeout=90))
    w.wait_for("stats in=", timeout=60)  # a stream's stats line, too
    assert w.stop(signal.SIGTERM) == 0, w.log()
    lines = w.log().splitlines()
    docs = [json.loads(line) for line in lines]  # every line is JSON
    assert all(d.keys() >= FIELDS for d in docs), lines
    processes = {d["process"] for d in docs}
    assert "MainProcess" in processes and any(p.startswith("stream-") for p in processes), processes
    stopped = [d for d in docs if "stopped cleanly" in d["message"]]
    assert len(stopped) == 2 and all(d["level"] == "INFO" for d in stopped), stopped
    assert all(d["time"].endswith("+00:00") for d in docs)
    # The first stats line of each stream gives a rate over the time since the stream started (it used
    # to say rate=0/s whatever had been read).
    for stream in {d["process"] for d in docs if " stats in=" in d["message"]}:
        first = next(d["message"] for d in docs if d["process"] == stream and " stats in=" in d["message"])
        m = re.search(r" in=(\d+) .* rate=(\d+)/s", first)
        assert m, first
        assert (int(m.group(1)) > 0) == (int(m.group(2)) > 0) or int(m.group(1)) < 10, first
