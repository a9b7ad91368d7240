"""`make demo`: mirror an embedded source cluster into an embedded target with `kmirror run`.

Starts two embedded clusters, fills the source with keyed records with headers, writes a consumer and a
producer file in MirrorMaker's legacy spelling, checks them with `kmirror check-config`, runs
`kmirror run` (while more records keep arriving), prints progress until the mirror has caught up,
shows that the target holds the same records, stops the mirror with SIGTERM, and stops everything.
Exit 0 only when the target is an exact copy.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror import compare, lag
from kmirror.embedded import clusters

QUIET = logging.getLogger("kmirror.librdkafka.demo")
QUIET.setLevel(logging.WARNING)

TOPICS = {"orders": 6, "payments": 3, "clickstream": 4}
GROUP = "kmirror-demo"


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def fill(bootstrap: str, records_per_topic: int, start: int = 0) -> int:
    # One record per request, so that the embedded broker reports exact log end offsets (see
    # docs/testing.md); the mirror itself batches normally.
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "enable.idempotence": True,
        }
    )
    n = 0
    for topic in TOPICS:
        for i in range(start, start + records_per_topic):
            key = f"{topic[:-1]}-{i % 97}".encode()
            value = (
                f'{{"topic":"{topic}","seq":{i},"amount":{(i * 37) % 1000}}}'.encode()
            )
            headers = [("source", b"demo"), ("seq", str(i).encode())]
            while True:
                try:
                    p.produce(
                        topic,
                        value,
                        key,
                        timestamp=1_750_000_000_000 + i,
                        headers=headers,
                    )
                    break
                except BufferError:
                    p.poll(0.1)
            n += 1
    assert p.flush(60) == 0, "the demo's own producer could not deliver"
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--records",
        type=int,
        default=5000,
        help="records per topic before the mirror starts",
    )
    ap.add_argument(
        "--live", type=int, default=1000, help="records per topic written while it runs"
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmirror-demo-"))
    with clusters("source", "target", log_dir=work) as c:
        src, tgt = c["source"].bootstrap, c["target"].bootstrap
        say(f"embedded clusters: source {src}, target {tgt} (logs in {work})")
        admin = AdminClient({"bootstrap.servers": src}, logger=QUIET)
        for f in admin.create_topics(
            [
                NewTopic(t, n, 1, config={"retention.ms": "604800000"})
                for t, n in TOPICS.items()
            ]
        ).values():
            f.result()
        t0 = time.monotonic()
        written = fill(src, args.records)
        say(
            f"source filled: {written} keyed records with headers in {', '.join(TOPICS)} "
            f"({time.monotonic() - t0:.1f} s)"
        )

        consumer = work / "sourceClusterConsumer.properties"
        consumer.write_text(
            f"# MirrorMaker-era keys, accepted as they are\nbootstrap.servers={src}\n"
            f"groupid={GROUP}\nauto.commit.enable=false\nexclude.internal.topics=true\n"
            "client.id=mirror_maker_consumer\nsession.timeout.ms=6000\n"
        )
        producer = work / "targetClusterProducer.properties"
        producer.write_text(
            f"bootstrap.servers={tgt}\nacks=-1\nretries=2147483647\n"
            "max.in.flight.requests.per.connection=1\nblock.on.buffer.full=true\n"
            "client.id=mirror_maker_producer\n"
        )
        kmirror = [sys.executable, "-m", "kmirror"]
        say("kmirror check-config:")
        subprocess.run(
            [
                *kmirror,
                "check-config",
                "--consumer.config",
                str(consumer),
                "--producer.config",
                str(producer),
            ],
            check=True,
        )

        log_path = work / "kmirror.log"
        cmd = [
            *kmirror,
            "run",
            "--consumer.config",
            str(consumer),
            "--producer.config",
            str(producer),
            "--whitelist",
            ",".join(TOPICS),
            "--num.streams",
            "2",
            "--offset.commit.interval.ms",
            "1000",
            "--stats.interval.ms",
            "5000",
        ]
        say("starting: kmirror run " + " ".join(cmd[4:]))
        with log_path.open("wb") as log:
            worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            t0 = time.monotonic()
            live_written = False
            total = written
            while True:
                time.sleep(1)
                if worker.poll() is not None:
                    say(
                        f"kmirror exited with {worker.returncode}; its log:\n{log_path.read_text()}"
                    )
                    return 1
                rows = lag.group_lag({"bootstrap.servers": src}, GROUP, TOPICS)
                behind = lag.total(rows)
                done = sum(r.offset for r in rows if r.offset > 0)
                say(
                    f"{time.monotonic() - t0:5.1f} s  mirrored {done:>6}/{total}  lag {behind}"
                )
                if not live_written and done > 0:
                    total += fill(src, args.live, start=args.records)
                    live_written = True
                    say(
                        f"{args.live * len(TOPICS)} more records written while the mirror runs"
                    )
                elif live_written and rows and behind == 0 and done == total:
                    break
                if time.monotonic() - t0 > 300:
                    say("the mirror did not catch up within 300 s")
                    return 1
            say(
                f"caught up in {time.monotonic() - t0:.1f} s; comparing source and target record by record"
            )
            source = compare.read_topics(
                {"bootstrap.servers": src}, TOPICS, expected=total
            )
            target = compare.read_topics(
                {"bootstrap.servers": tgt}, TOPICS, expected=total
            )
            result = compare.compare(source, target)
            head = ("topic", "partitions", "source", "target", "missing", "dupes")
            print("{:12} {:>10} {:>8} {:>8} {:>8} {:>6}  same".format(*head))
            for row in result.values():
                cells = (row.topic, len(row.partitions), row.source_records, row.target_records, row.missing,
                         row.duplicates, "yes" if row.identical else "NO")
                print("{:12} {:>10} {:>8} {:>8} {:>8} {:>6}  {}".format(*cells))
            sample = source[("orders", 0)][0]
            say(
                f"first record of orders[0] on both sides: key={sample[0]!r} headers={sample[2]!r} "
                f"timestamp={sample[3]}"
            )
            identical = all(r.identical for r in result.values()) and set(
                result
            ) == set(TOPICS)
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                rc = worker.wait(60)
                say(f"kmirror stopped with SIGTERM: exit {rc} (flushed and committed)")
        say(
            "target is an exact copy of the source"
            if identical
            else "TARGET DIFFERS FROM SOURCE"
        )
        return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
