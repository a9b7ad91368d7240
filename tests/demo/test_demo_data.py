"""The demo's own data path (demo/records.py, demo/local.py) against brokers whose retention runs every
second: every record the demo writes is still on the source after a retention pass, on the target once,
and the demo's lines say no more than that.

Kafka deletes a segment once its newest record's timestamp is older than the topic's ``retention.ms``; the
demo's topics keep a week, so records stamped with a fixed date long past (as the demo once did) are deleted
by the first retention pass, about 30 s after a broker starts, before or while they are mirrored.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kmirror.kafkaio import client_log
from kmirror.testing.kafka import kafka_clusters

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demo"))
import local
import records

DEMO_DIR = Path(local.__file__).parent

# demo/local.py's data path, run as make demo-local runs it (a process of its own): exit 0 when its own
# comparison found an exact copy.
_DEMO = """
import sys
from pathlib import Path
import local
src, tgt, work, per_topic, live = sys.argv[1:]
sys.exit(0 if local.mirror(src, tgt, Path(work), int(per_topic), int(live)) else 1)
"""

pytestmark = pytest.mark.integration

# The retention pass one second after start and every second after that (Kafka's defaults: 30 s, 5 min).
RETENTION_EVERY_SECOND = {"log.initial.task.delay.ms": "1000", "log.retention.check.interval.ms": "1000"}
DAY_MS = 86_400_000
PROBE_LOG = client_log("retention-probe")


def retention_pass(bootstrap: str, timeout: float = 120.0) -> None:
    """Return once the broker has run a whole retention pass that began after this call.

    A new probe topic gets one record stamped a day ago with ``retention.ms`` of a minute; the pass that
    deletes it is the first to see it, and one pass goes over every log of the broker.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap}, logger=PROBE_LOG)
    probe = f"retention-probe-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(probe, 1, 1, config={"retention.ms": "60000"})])[probe].result()
    p = Producer({"bootstrap.servers": bootstrap}, logger=PROBE_LOG)
    p.produce(probe, b"expired", timestamp=int(time.time() * 1000) - DAY_MS)
    assert p.flush(30) == 0, "the probe record was not delivered"
    tp = TopicPartition(probe, 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result().offset
        if start > 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"no retention pass on {bootstrap} within {timeout:.0f} s")


def test_every_record_written_outlives_retention_and_is_on_the_target_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    records_per_topic, live = 400, 100
    with (
        records.held_client_lines(),
        kafka_clusters(
            "source", "target", log_dir=tmp_path / "brokers", broker_config=RETENTION_EVERY_SECOND
        ) as c,
    ):
        src, tgt = c["source"].bootstrap, c["target"].bootstrap
        # The demo's run: fill, mirror with live traffic, its own comparison. In a process of its own, as
        # make demo runs it: a client another test of this pytest worker left behind writes librdkafka's
        # lines to this process's stderr (seen in a full run: a consumer retrying a broker long gone).
        demo = subprocess.run(
            [sys.executable, "-c", _DEMO, src, tgt, str(tmp_path), str(records_per_topic), str(live)],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=DEMO_DIR,
        )
        out, err = demo.stdout, demo.stderr
        assert demo.returncode == 0, f"the demo's comparison failed (exit {demo.returncode}):\n{out}\n{err}"
        # Then a retention pass on each side, and the comparison once more: nothing the demo wrote expired.
        retention_pass(src)
        retention_pass(tgt)
        written = {topic: records_per_topic + live for topic in local.TOPICS}
        assert records.compare_table(src, tgt, written), capfd.readouterr().out
    progress = re.findall(r"mirrored +(\d+)/(\d+)", out)
    assert progress, out
    assert all(int(done) <= int(of) for done, of in progress), progress
    assert "exact copy" in out and " NO" not in out, out
    # librdkafka's own lines (its "%N|" stderr format, or the held logger's) never reach the demo's output.
    assert not re.search(r"^%\d\|", out + err, re.MULTILINE), err
