"""A topic refresh whose requests fail on the way does not stop the mirror (Apache Kafka 4.3).

A new source topic appears while the target is frozen (SIGSTOP): the refresh that would create its
destination topic times out. The mirror logs it, keeps going, and creates the topic at a later refresh
once the target answers; every record arrives. (Before, any such error of a refresh ended the stream with
exit 1: on Kafka's SASL listeners, which close every connection when a login's lifetime ends, a refresh
that met that moment restarted the unit.)"""

from __future__ import annotations

import signal
from pathlib import Path

from mirror_harness import (
    Worker,
    assert_mirrored,
    consumer_file,
    create_topic,
    make_records,
    produce,
    producer_file,
    read_all,
    run_args,
)

from kmirror.testing.kafka import KafkaCluster


def test_a_refresh_that_times_out_is_retried_not_fatal(
    tmp_path: Path, kafka: dict[str, KafkaCluster]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    first, later = "refresh.first", "refresh.later"
    create_topic(src, first, 2)
    records = make_records(first, 2, 20)
    produce(src, records)
    w = Worker(
        tmp_path,
        run_args(
            consumer_file(tmp_path, src, "g-refresh"),
            producer_file(tmp_path, tgt),
            "--whitelist",
            r"refresh\..*",
            "--num.streams",
            "1",
        ),
    )
    try:
        assert_mirrored(records, read_all(tgt, [first], len(records), timeout=90))
        tgt.pause()
        try:
            create_topic(src, later, 2)
            more = make_records(later, 2, 20)
            produce(src, more)
            w.wait_for("topic refresh failed", timeout=120)
            assert w.proc.poll() is None, w.log()
        finally:
            tgt.resume()
        assert_mirrored(more, read_all(tgt, [later], len(more), timeout=120))
        assert w.proc.poll() is None, w.log()
    finally:
        rc = w.stop(signal.SIGTERM)
    assert rc == 0, w.log()
    assert " ERROR " not in w.log(), w.log()
