"""Partitions added to a source topic while it is mirrored under live traffic reach the target.

A keyed producer with the default partitioner keeps writing while the source topic grows from 2 to 5
partitions (it learns the new partitions from its metadata refresh and spreads the keys over them). The
running mirror must add the partitions to the destination topic within its topic refresh interval and
copy every record into the same partition number, in order, none missing and none twice.
"""

from __future__ import annotations

import signal
import threading
import time

import mirror_harness as mh
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from kmirror.testing.kafka import KafkaCluster, free_port

TOPIC = "growing"
BEFORE, AFTER = 2, 5
REFRESH_MS = 2000
# The refresh itself (source metadata, describe, create partitions on the target, the producers' metadata)
# takes time on top of the interval; on the loaded 2-core test machine well under this.
REFRESH_WORK_S = 3.0


class KeyedTraffic:
    """A Java-style keyed producer: no partition given, the default partitioner picks one from the key among
    the partitions the producer's metadata knows (refreshed every 500 ms, so it sees added partitions)."""

    def __init__(self, cluster: KafkaCluster, topic: str, rate_per_s: float = 200.0) -> None:
        self.cluster, self.topic, self.rate = cluster, topic, rate_per_s
        self.sent = 0
        self.delivered: list[tuple[int, int]] = []  # (partition, offset) of each record, as acknowledged
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> KeyedTraffic:
        self._thread.start()
        return self

    def _ack(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        i = 0
        while not self._stop.is_set():
            headers: list[tuple[str, bytes | None]] = [("seq", b"%d" % i), ("trace", None)]
            p.produce(
                self.topic,
                b"value-%d" % i,
                b"customer-%d" % (i % 40),
                timestamp=1_700_000_000_000 + i,
                headers=headers,
                on_delivery=self._ack,
            )
            self.sent += 1
            i += 1
            p.poll(0)
            time.sleep(1 / self.rate)
        assert p.flush(30) == 0

    def partitions_written(self) -> set[int]:
        return {part for part, _ in list(self.delivered)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def end_offsets(cluster: KafkaCluster, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kmirror-test-probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(partitions)
        }
    except KafkaException:  # the topic does not exist yet
        return {}
    finally:
        c.close()


def test_partitions_added_to_a_source_topic_while_mirroring_reach_the_target(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, TOPIC, BEFORE)
    port = free_port()
    w = mh.Worker(
        tmp_path,
        [
            *mh.run_args(mh.consumer_file(tmp_path, src), mh.producer_file(tmp_path, tgt)),
            "--whitelist",
            TOPIC,
            "--num.streams",
            "2",
            "--topic.refresh.interval.ms",  # the last one given counts (run_args gives 1000)
            str(REFRESH_MS),
            "--metrics.port",
            str(port),
        ],
    )
    workers.append(w)
    traffic = KeyedTraffic(src, TOPIC).start()
    try:
        # Mirroring under way: both partitions on the target already receive records.
        mh.wait_until(
            lambda: sorted(n >= 50 for n in end_offsets(tgt, BEFORE).values()) == [True] * BEFORE,
            timeout=90,
            what="records mirrored into both partitions before the growth",
        )

        admin = AdminClient({"bootstrap.servers": src.bootstrap})
        for f in admin.create_partitions([NewPartitions(TOPIC, AFTER)]).values():
            f.result()
        grown_at = time.monotonic()
        mh.wait_until(
            lambda: mh.topic_partitions(tgt).get(TOPIC) == AFTER,
            timeout=REFRESH_MS / 1000 + REFRESH_WORK_S,
            what=f"the destination topic to grow to {AFTER} partitions within the refresh interval",
        )
        growth_s = time.monotonic() - grown_at
        # The producer goes on writing, now into the new partitions too.
        mh.wait_until(
            lambda: traffic.partitions_written() == set(range(AFTER)),
            timeout=30,
            what="the producer writing into the added partitions",
        )
        settle = len(traffic.delivered) + 200
        mh.wait_until(lambda: len(traffic.delivered) >= settle, what="traffic after the growth")
    finally:
        traffic.stop()
    assert not traffic.errors, traffic.errors[:3]
    assert len(traffic.delivered) == traffic.sent

    source = mh.read_all(src, [TOPIC], traffic.sent)
    assert len(source) == traffic.sent
    per_partition = mh.by_partition(source)
    assert all(len(per_partition[(TOPIC, p)]) > 0 for p in range(AFTER)), {
        tp: len(rs) for tp, rs in per_partition.items()
    }
    target = mh.read_all(tgt, [TOPIC], len(source))
    assert mh.topic_partitions(tgt)[TOPIC] == AFTER
    # Same partition number, same order, same key/value/headers (the null header value too)/timestamp,
    # nothing missing, nothing twice.
    mh.assert_mirrored(source, target, exact=True)
    assert all(r.headers[1] == ("trace", None) for r in target)

    log = w.log()
    assert f"added partitions to destination topic {TOPIC}: {AFTER}, was {BEFORE}" in log
    assert "placed by key hash" not in log
    # Every partition, the added ones too, committed up to its end.
    ends = {p: len(per_partition[(TOPIC, p)]) for p in range(AFTER)}
    mh.wait_until(
        lambda: mh.committed(src, "mirror", TOPIC, AFTER) == ends, what="offsets committed to the end"
    )
    # No topic short of partitions on the target: the gauge has no series (or 0).
    mismatch = {k: v for k, v in mh.scrape(port).items() if k[0] == "kmirror_topic_partition_mismatch"}
    assert all(v == 0 for v in mismatch.values()), mismatch
    assert w.stop(signal.SIGTERM) == 0
    print(f"destination grew {growth_s:.2f} s after the source; {len(source)} records mirrored")
