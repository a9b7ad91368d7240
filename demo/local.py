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

from records import add, compare_table, create_topics, fill, held_client_lines, mirrored, say

from kmirror.health import lag
from kmirror.testing.kafka import kafka_clusters as clusters
from kmirror.testing.mirrors import run_command

TOPICS = {"orders": 6, "payments": 3, "clickstream": 4}
GROUP = "kmirror-demo"


def mirror(src: str, tgt: str, work: Path, records: int, live: int) -> bool:
    """The demo's data path: fill the source, check the MirrorMaker-era files, run `kmirror run` while more
    records arrive, follow it until it has mirrored every record written, compare both sides, stop it.
    True when the target holds every record written, once, in source order."""
    create_topics(src, TOPICS)
    t0 = time.monotonic()
    written = fill(src, TOPICS, records)
    say(
        f"source filled: {sum(written.values())} keyed records with headers in {', '.join(TOPICS)} "
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
        [*kmirror, "check-config", "--consumer.config", str(consumer), "--producer.config", str(producer)],
        check=True,
    )

    log_path = work / "kmirror.log"
    cmd = run_command(consumer, producer, ",".join(TOPICS), "--num.streams", "2",
                      "--offset.commit.interval.ms", "1000", "--stats.interval.ms", "5000")  # fmt: skip
    say("starting: kmirror run " + " ".join(cmd[4:]))
    with log_path.open("wb") as log:
        worker = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    identical = False
    try:
        t0 = time.monotonic()
        live_written = False
        while True:
            time.sleep(1)
            if worker.poll() is not None:
                say(f"kmirror exited with {worker.returncode}; its log:\n{log_path.read_text()}")
                return False
            rows = lag.group_lag({"bootstrap.servers": src}, GROUP, TOPICS)
            done, behind = mirrored(rows)
            say(f"{time.monotonic() - t0:5.1f} s  mirrored {done:>6}/{done + behind}  lag {behind}")
            if not live_written and done > 0:
                add(written, fill(src, TOPICS, live, start=records))
                live_written = True
                say(f"{live * len(TOPICS)} more records written while the mirror runs")
            elif live_written and rows and behind == 0 and done == sum(written.values()):
                break
            if time.monotonic() - t0 > 300:
                say("the mirror did not catch up within 300 s")
                return False
        say(f"caught up in {time.monotonic() - t0:.1f} s; comparing source and target record by record")
        identical = compare_table(src, tgt, written)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            rc = worker.wait(60)
            say(f"kmirror stopped with SIGTERM: exit {rc} (flushed and committed)")
    return identical


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
    with held_client_lines() as held, clusters("source", "target", log_dir=work) as c:
        src, tgt = c["source"].bootstrap, c["target"].bootstrap
        say(f"Apache Kafka clusters: source {src}, target {tgt} (logs in {work})")
        identical = mirror(src, tgt, work, args.records, args.live)
        if not identical:
            held.dump()
    say("the target is an exact copy of every record written" if identical else "TARGET DIFFERS FROM SOURCE")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
