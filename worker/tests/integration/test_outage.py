"""A target outage longer than librdkafka's default message timeout (300 s), under live traffic.

One long test on purpose (it proves "longer than message.timeout.ms" once, and the checks that need an
outage of any length ride along): the mirror keeps running blocked, says so in its log and metrics,
commits nothing the target has not acknowledged, catches up by itself when the target returns; then a
SIGTERM during a second outage exits 0 without committing past the target, and a restart loses nothing.
"""

from __future__ import annotations

import signal
import time
import urllib.request

import mirror_harness as mh
from prometheus_client.parser import text_string_to_metric_families

from kmirror.testing.embedded import free_port

LIBRDKAFKA_DEFAULT_MESSAGE_TIMEOUT_S = 300
OUTAGE_S = LIBRDKAFKA_DEFAULT_MESSAGE_TIMEOUT_S + 15


def blocked_seconds(port: int) -> float | None:
    """The stream's kmirror_target_blocked_seconds; None until the stream has handed in its first snapshot."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "kmirror_target_blocked_seconds" and s.labels == {"source": "consumer", "stream": "0"}
    ]
    assert len(values) <= 1, text
    return values[0] if values else None


def on_target_below(records: list[mh.Rec], target: list[mh.Rec], upto: dict[int, int]) -> None:
    """The first upto[p] records sent to partition p (source offsets 0..upto[p]-1) are on the target."""
    src, tgt = mh.by_partition(records), mh.by_partition(target)
    for (topic, p), sent in src.items():
        have = {r.content for r in tgt.get((topic, p), [])}
        missing = [r.content for r in sent[: upto[p]] if r.content not in have]
        assert not missing, (
            f"{topic}[{p}]: committed {upto[p]}, {len(missing)} records before it not on the target"
        )


def test_target_outage_longer_than_the_message_timeout(kafka, tmp_path, workers):
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "live", 2)  # traffic during the long outage
    mh.create_topic(src, "later", 2)  # traffic during the second outage (LiveTraffic restarts its sequence)
    port = free_port()
    files = (mh.consumer_file(tmp_path, src), mh.producer_file(tmp_path, tgt))
    args = mh.run_args(*files, "--whitelist", "live|later", "--num.streams", "1", "--queue.size", "1000")
    w = mh.Worker(tmp_path, [*args, "--metrics.port", str(port)])
    workers.append(w)

    # --- 1. an outage longer than librdkafka's default message.timeout.ms, under live traffic
    with mh.LiveTraffic(src, "live", 2, rate_per_s=100) as traffic:
        w.wait_for("assigned")
        mh.wait_until(lambda: sum(mh.committed(src, "mirror", "live", 2).values()) > 0, what="a first commit")
        mh.wait_until(lambda: blocked_seconds(port) == 0, what="the stream's first metrics, not blocked")
        tgt.pause()
        paused_at = time.monotonic()
        try:
            w.wait_for("target unreachable since", timeout=60)
            assert ", reading paused" in w.log()
            frozen = mh.committed(src, "mirror", "live", 2)
            while time.monotonic() - paused_at < OUTAGE_S:
                time.sleep(5)
                assert w.proc.poll() is None, f"the mirror stopped during the outage:\n{w.log()}"
            blocked = blocked_seconds(port)
            # Nothing acknowledged, nothing committed: the offsets did not move for the whole outage.
            assert mh.committed(src, "mirror", "live", 2) == frozen
        finally:
            tgt.resume()
        assert blocked is not None and blocked > LIBRDKAFKA_DEFAULT_MESSAGE_TIMEOUT_S - 30, blocked
        w.wait_for("target acknowledging again", timeout=120)
        mh.wait_until(lambda: blocked_seconds(port) == 0, timeout=30, what="the blocked gauge back to 0")
        time.sleep(2)
    sent = list(traffic.sent)
    mh.assert_mirrored(sent, mh.read_all(tgt, ["live"], len(sent), timeout=120))
    mh.wait_until(
        lambda: sum(mh.committed(src, "mirror", "live", 2).values()) == len(sent),
        timeout=60,
        what="commits catching up after the outage",
    )
    log = w.log()
    assert "Message timed out" not in log
    assert "send failed" not in log
    assert "broker version < 0.10" not in log  # librdkafka's misleading guess, every 10 s before
    # One blocked line per stats interval (2 s in these tests), not a flood.
    assert log.count("target unreachable since") <= OUTAGE_S / 2 + 20

    # --- 2. SIGTERM during a second outage: exit 0, nothing committed past what the target has
    with mh.LiveTraffic(src, "later", 2, rate_per_s=100) as traffic2:
        time.sleep(2)
        tgt.pause()
        try:
            lines_before = log.count("target unreachable since")
            mh.wait_until(
                lambda: w.log().count("target unreachable since") > lines_before,
                timeout=60,
                what="the stream blocked again",
            )
            assert w.stop(timeout=120) == 0
        finally:
            tgt.resume()
    assert "stopped during a target outage" in w.log()
    later = traffic2.sent
    after_stop = mh.committed(src, "mirror", "later", 2)
    on_target_below(later, mh.read_all(tgt, ["later"], 0, timeout=60, settle=3), after_stop)
    assert sum(after_stop.values()) < len(later)  # what was read during the outage was not committed

    # --- 3. a restart mirrors what the stop left unacknowledged: nothing lost
    w2 = mh.Worker(tmp_path, args, name="restarted")
    workers.append(w2)
    w2.wait_for("assigned")
    mh.assert_mirrored(later, mh.read_all(tgt, ["later"], len(later), timeout=120))
    mh.assert_mirrored(sent, mh.read_all(tgt, ["live"], len(sent), timeout=60))
    mh.wait_until(
        lambda: sum(mh.committed(src, "mirror", "later", 2).values()) == len(later),
        timeout=60,
        what="commits after the restart",
    )
    assert w2.stop() == 0


def test_stop_while_blocked_on_a_full_queue_then_target_back_commits_only_what_it_has(
    kafka, tmp_path, workers
):
    """SIGTERM while the stream waits for room in a full queue (records read but not handed over), and
    the target back within the shutdown time: what was handed over is flushed and committed, nothing past
    the first record never handed over; a restart mirrors the rest."""
    src, tgt = kafka["source"], kafka["target"]
    mh.create_topic(src, "burst", 2)
    files = (mh.consumer_file(tmp_path, src), mh.producer_file(tmp_path, tgt))
    # A tiny queue and no commit point during the test: the stream blocks waiting for room.
    args = mh.run_args(
        *files,
        "--whitelist",
        "burst",
        "--num.streams",
        "1",
        "--queue.size",
        "100",
        "--offset.commit.interval.ms",
        "600000",
    )
    w = mh.Worker(tmp_path, args)
    workers.append(w)
    w.wait_for("assigned")
    tgt.pause()
    try:
        records = mh.make_records("burst", 2, 1500)
        mh.produce(src, records)
        w.wait_for("target unreachable since", timeout=60)
        w.proc.send_signal(signal.SIGTERM)
        w.wait_for("SIGTERM received")
        time.sleep(1)
    finally:
        tgt.resume()
    # The one SIGTERM must be enough: wait for the exit (stop() would signal again if the exit came late,
    # and a second SIGTERM means "stop every stream now", another scenario).
    assert w.proc.wait(90) == 0
    assert w.stop() == 0
    assert "stopped cleanly" in w.log()
    # A partition never read has no committed offset (negative); one read has at most what was handed over.
    after_stop = {p: max(0, o) for p, o in mh.committed(src, "mirror", "burst", 2).items()}
    assert 0 < sum(after_stop.values()) < len(records), after_stop
    on_target_below(records, mh.read_all(tgt, ["burst"], 0, timeout=60, settle=3), after_stop)

    w2 = mh.Worker(tmp_path, args, name="restarted")
    workers.append(w2)
    mh.assert_mirrored(records, mh.read_all(tgt, ["burst"], len(records), timeout=120))
    assert w2.stop() == 0
    assert mh.committed(src, "mirror", "burst", 2) == {0: 1500, 1: 1500}
