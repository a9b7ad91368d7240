"""A topic refresh whose requests fail on the way does not stop the mirror (Apache Kafka 4.3).

A new source topic appears while the target is frozen (SIGSTOP): the refresh that would create its
destination topic times out. The mirror logs it, keeps going, and creates the topic at a later refresh
once the target answers; every record arrives. (Before, any such error of a refresh ended the stream with
exit 1: on Kafka's SASL listeners, which close every connection when a login's lifetime ends, a refresh
that met that moment restarted the unit.)"""

from __future__ import annotations

import signal
from pathlib import Path

import mirror_harness as mh

from kmirror.testing.kafka import KafkaCluster


def test_a_refresh_that_times_out_is_retried_not_fatal(
    tmp_path: Path, kafka: dict[str, KafkaCluster]
) -> None:
    src, tgt = kafka["source"], kafka["target"]
    first, later = "refresh.first", "refresh.later"
    mh.create_topic(src, first, 2)
    records = mh.make_records(first, 2, 20)
    mh.produce(src, records)
    w = mh.mirror_worker(tmp_path, src, tgt, r"refresh\..*", 1, group="g-refresh")
    try:
        mh.assert_mirrored(records, mh.read_all(tgt, [first], len(records), timeout=90))
        tgt.pause()
        try:
            mh.create_topic(src, later, 2)
            more = mh.make_records(later, 2, 20)
            mh.produce(src, more)
            w.wait_for("topic refresh failed", timeout=120)
            assert w.proc.poll() is None, w.log()
        finally:
            tgt.resume()
        mh.assert_mirrored(more, mh.read_all(tgt, [later], len(more), timeout=120))
        assert w.proc.poll() is None, w.log()
    finally:
        rc = w.stop(signal.SIGTERM)
    assert rc == 0, w.log()
    assert " ERROR " not in w.log(), w.log()
