"""How long the stream loop's topic refresh is held by the config sync when one source node is frozen.

A three-node Apache Kafka source (six topics, replication factor 3); every second, as a stream's refresh
does, the consumer's metadata call (``list_topics``, 10 s) and the config sync are timed in the calling
thread: ``blocking`` calls :meth:`kmirror.mirror.topics.ConfigSync.sync` there (what the stream loop did
before), ``background`` calls :meth:`~kmirror.mirror.topics.ConfigSync.run` (what it does now: the sync in
a thread of its own). The node the metadata names as controller (where librdkafka sends DescribeConfigs)
is frozen (SIGSTOP: connections accepted, nothing answered, like a hung broker or a black-holed network)
from 5 s to 55 s. Reported per
mode: the longest call of each kind while frozen and how many refreshes were held over 1 s.

    .venv/bin/python bench/config_sync_stall.py [--frozen-s 50]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.mirror import topics
from kmirror.testing.kafka import KafkaCluster, running

TOPICS = [f"t{i}" for i in range(6)]


def measure(mode: str, frozen_s: float) -> tuple[float, float, int, int]:
    with running({"s": KafkaCluster("s", size=3)}, None) as cs:
        c = cs["s"]
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic(n, 3, 3) for n in TOPICS]).values():
            f.result(30)
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "bench"})
        consumer.subscribe(TOPICS)
        # As a stream has it: its own admin client, which has described the topics once (at start).
        source_admin = AdminClient({"bootstrap.servers": c.bootstrap})
        sync = topics.ConfigSync(source_admin, source_admin, "bench")
        sync.sync(TOPICS)
        # librdkafka sends DescribeConfigs of topics to the controller the metadata names (in KRaft a
        # broker the cluster picks): that node is the one frozen.
        victim = source_admin.list_topics(timeout=10).controller_id
        pid = c.node(victim).process.pid  # type: ignore[union-attr]
        t0 = time.monotonic()
        frozen = False
        worst_md = worst_sync = 0.0
        held = refreshes = 0
        try:
            while time.monotonic() - t0 < 5 + frozen_s:
                if not frozen and time.monotonic() - t0 >= 5:
                    os.kill(pid, signal.SIGSTOP)
                    frozen = True
                a = time.monotonic()
                with contextlib.suppress(Exception):  # a timed-out metadata call is what is measured
                    consumer.list_topics(timeout=10)
                b = time.monotonic()
                if mode == "blocking":
                    sync.sync(TOPICS)
                else:
                    sync.run(TOPICS)
                e = time.monotonic()
                if frozen:
                    refreshes += 1
                    worst_md, worst_sync = max(worst_md, b - a), max(worst_sync, e - b)
                    held += e - a > 1
                consumer.consume(100, 0.2)
                time.sleep(0.8)
        finally:
            os.kill(pid, signal.SIGCONT)
            consumer.close()
        return worst_md, worst_sync, held, refreshes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen-s", type=float, default=50.0)
    args = ap.parse_args()
    for mode in ("blocking", "background"):
        md, sync, held, n = measure(mode, args.frozen_s)
        print(
            f"{mode}: longest list_topics {md:.3f} s, longest config sync call {sync:.3f} s; "
            f"{held} of {n} refreshes held over 1 s while a node was frozen"
        )


if __name__ == "__main__":
    main()
