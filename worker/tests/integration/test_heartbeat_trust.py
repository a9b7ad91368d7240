"""A heartbeat dated in the future (a clock far ahead, or a record anyone who may write to the heartbeat
topic on the source can write) is not believed: before, it became the newest heartbeat and pinned
``kmirror_heartbeat_age_seconds`` at 0, so the link-stale alert could never fire.

The supervisor's heartbeat thread (kmirror.mirror.heartbeats.Heartbeat) runs against real brokers; the
test writes the copies on the target itself, as the mirror would have copied them from the source.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from mirror_harness import create_topic, wait_until

from kmirror.mirror.heartbeats import FUTURE_SKEW_S, Heartbeat, heartbeat_topic, metric_families
from kmirror.testing.kafka import KafkaCluster

# Within what a broker takes by default (log.message.timestamp.after.max.ms, an hour since Kafka 3.6;
# unlimited before), far past FUTURE_SKEW_S.
AHEAD_MS = 30 * 60 * 1000


def gauges(beat: Heartbeat) -> dict[str, float]:
    return {s.name: s.value for family in metric_families([beat]) for s in family.samples}


def test_a_heartbeat_dated_in_the_future_does_not_pin_the_age_at_zero(kafka: dict[str, KafkaCluster]) -> None:
    source, target = kafka["source"], kafka["target"]
    topic = heartbeat_topic("east")
    create_topic(target, topic, 1)  # the copy the mirror made
    beat = Heartbeat(
        "east", {"bootstrap.servers": source.bootstrap}, {"bootstrap.servers": target.bootstrap}, 500
    )
    stop = threading.Event()
    thread = threading.Thread(target=beat.run, args=(stop,), daemon=True)
    thread.start()
    copies = Producer({"bootstrap.servers": target.bootstrap})

    def copy(written_ms: int) -> None:
        failed: list[object] = []
        copies.produce(
            topic, b"{}", b"east", 0, timestamp=written_ms, on_delivery=lambda e, _m: e and failed.append(e)
        )
        assert copies.flush(30) == 0 and not failed, failed

    try:

        def read_one() -> bool:
            """The reader starts at the end of the copy: one more copy until it has read one."""
            if beat.newest_ms is None:
                copy(int(time.time() * 1000))
            return beat.newest_ms is not None

        wait_until(read_one, 60, "the first copied heartbeat read")
        forged = int(time.time() * 1000) + AHEAD_MS
        copy(forged)
        good = int(time.time() * 1000)
        copy(good)  # after the forged one: read once the forged one was
        wait_until(lambda: beat.newest_ms == good, 60, "the heartbeat after the forged one taken as newest")
        assert beat.future == 1
        time.sleep(1.5)  # the age of a heartbeat written 1.5 s ago or more
        seen = gauges(beat)
        assert seen["kmirror_heartbeats_future_total"] == 1
        assert 1.5 <= seen["kmirror_heartbeat_age_seconds"] < FUTURE_SKEW_S, seen
    finally:
        stop.set()
        thread.join(30)
