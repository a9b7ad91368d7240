"""`make demo-local`: mirror an embedded source cluster into an embedded target with `kmirror run`.

The quick demo, with no hosts and no root (`make demo` deploys onto real hosts with Ansible).

Starts two embedded clusters, fills the source with keyed records with headers, writes a consumer and a
producer file in MirrorMaker's legacy spelling, checks them with `kmirror check-config`, runs
`kmirror run` (while more records keep arriving), prints progress until the mirror has caught up,
shows that the target holds the same records, stops the mirror with SIGTERM, and stops everything.
Exit 0 only when the target is an exact copy.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import compare_table, create_topics, fill, say

from kmirror.health import lag
from kmirror.testing.kafka import kafka_clusters as clusters
from kmirror.testing.mirrors import run_command

TOPICS = {"orders": 6, "payments": 3, "clickstream": 4}
GROUP = "kmirror-demo"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--records",
        type=int,
        default=5000,
        help="records per topic before the mirror starts",
    )
    ap.add_argument("--live", type=int, default=1000, help="records per topic written while it runs")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmirror-demo-"))
    with clusters("source", "target", log_dir=work) as c:
        src, tgt = c["source"].bootstrap, c["target"].bootstrap
        say(f"Apache Kafka clusters: source {src}, target {tgt} (logs in {work})")
        create_topics(src, TOPICS)
        t0 = time.monotonic()
        written = fill(src, TOPICS, args.records)
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
        cmd = run_command(consumer, producer, ",".join(TOPICS), "--num.streams", "2",
                          "--offset.commit.interval.ms", "1000", "--stats.interval.ms", "5000")  # fmt: skip
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
                    say(f"kmirror exited with {worker.returncode}; its log:\n{log_path.read_text()}")
                    return 1
                rows = lag.group_lag({"bootstrap.servers": src}, GROUP, TOPICS)
                behind = lag.total(rows)
                done = sum(r.offset for r in rows if r.offset > 0)
                say(f"{time.monotonic() - t0:5.1f} s  mirrored {done:>6}/{total}  lag {behind}")
                if not live_written and done > 0:
                    total += fill(src, TOPICS, args.live, start=args.records)
                    live_written = True
                    say(f"{args.live * len(TOPICS)} more records written while the mirror runs")
                elif live_written and rows and behind == 0 and done == total:
                    break
                if time.monotonic() - t0 > 300:
                    say("the mirror did not catch up within 300 s")
                    return 1
            say(f"caught up in {time.monotonic() - t0:.1f} s; comparing source and target record by record")
            identical = compare_table(src, tgt, list(TOPICS), total)
        finally:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                rc = worker.wait(60)
                say(f"kmirror stopped with SIGTERM: exit {rc} (flushed and committed)")
        say("target is an exact copy of the source" if identical else "TARGET DIFFERS FROM SOURCE")
        return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
