"""The mirror engine: one stream = one consumer (a member of the mirror group) and its producer(s).

Guarantee: an offset is committed only after the target acknowledged every record before it.

* Records are read in batches; every record of a batch is handed to the producer before the next
  batch is read, so a consumer's *position* never runs ahead of what was produced.
* At each commit point (every ``commit_interval_ms``, on partition revocation, on stop) the producers
  are flushed (every record acknowledged by the target, or failed) and only then the positions are
  committed. A failed record stops the stream before that commit: nothing after the last commit is
  marked as done, so it is mirrored again on restart (at-least-once, never lost).
* Success reports are switched off in librdkafka (``delivery.report.only.error``): the per-record
  path is a read, an ``if`` and a ``produce`` call.

Back-pressure: the producer queue is bounded (``--queue.size`` records per stream, split between the
stream's producers); when it is full the stream serves delivery reports until there is room, so reading
slows to the target's pace and nothing is dropped.

Target outages: records never time out (``message.timeout.ms=0``, see :mod:`kmirror.config.safety`). When the
target acknowledges nothing for ``BLOCKED_AFTER_S`` while the stream waits for it (queue full, or a
commit point), the stream is *blocked*: its partitions are paused and the consumer is still polled, so
it stays in its group; it logs one line per stats interval and reports the blocked seconds
(``kmirror_target_blocked_seconds``). When the target answers again it resumes by itself. A stop
request during an outage gives the target ``shutdown_timeout_s`` more, then exits without committing
what the target has not acknowledged (it is mirrored again on restart).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.config import admin_settings, client_conf
from kmirror.errors import KmirrorError
from kmirror.kafkaio import Repeats, client_log, repeats
from kmirror.lineage.provenance import Headers, Stamp
from kmirror.mirror import metrics
from kmirror.mirror.authfail import Access, quiet_repeated_logins
from kmirror.mirror.clients import Clients
from kmirror.mirror.commits import CommitPoints
from kmirror.mirror.failures import SendFailures, quiet
from kmirror.mirror.gaps import OffsetResets, cooperative
from kmirror.mirror.membership import Membership, Rejoin
from kmirror.mirror.outage import TargetNoise, TargetWaits
from kmirror.mirror.placement import Placement
from kmirror.mirror.reach import Reachability
from kmirror.mirror.spec import (
    IDLE_WAIT_S,
    REPORT_INTERVAL_S,
    STATISTICS_INTERVAL_MS,
    Failure,
    StreamSpec,
    queue_shares,
)
from kmirror.mirror.stalls import StallWatch, fetches

__all__ = ["Failure", "Stalled", "Stream", "StreamSpec", "queue_shares"]

log = logging.getLogger(__name__)
# At most one warning about distrusted provenance headers per this many seconds (the counter has them all).
DISTRUSTED_WARN_S = 60.0


class Stalled(Rejoin):
    """Partitions whose fetching stopped (:class:`kmirror.mirror.stalls.StallWatch`): the engine replaces
    its consumer."""


class Stream:
    """One stream: its clients and the parts that own what it knows, each named after what it does
    (:class:`Access`, :class:`Placement`, :class:`CommitPoints`, :class:`Membership`,
    :class:`SendFailures`, :class:`TargetWaits`, :class:`OffsetResets`, :class:`Reachability`); the
    stream holds the loop, the commit points' order and its life from join to stop."""

    def __init__(self, spec: StreamSpec, *, report: Callable[[metrics.Snapshot], None] | None = None) -> None:
        self.spec = spec
        self.snap = metrics.Snapshot(spec.source, spec.index)
        self._report = report
        self._producer_stats: dict[int, tuple[int, int]] = {}
        self._stop = False
        # The first stats line's rate is over the time since the stream started (an empty snapshot of then).
        self._last_stats: metrics.Snapshot | None = metrics.Snapshot(spec.source, spec.index)
        self.unacknowledged = 0  # records the target had not acknowledged when the stream stopped
        self.clean = False  # stopped with everything read acknowledged and committed
        self.clients = clients = Clients()
        self.access = access = Access(spec, clients, self._a_topic)
        self.placement = placement = Placement(spec, self.snap, clients, access, self._subscribe)
        self.points = points = CommitPoints(spec, access)
        self.membership = membership = Membership(spec, clients, placement, points, self._commit_positions)
        self.failures = failures = SendFailures(spec, self.snap, clients, access, self.request_stop)
        self.waits = TargetWaits(
            spec,
            clients,
            failures,
            stopping=self._stopping,
            report=self._report_now,
            consumer_error=self._consumer_error,
        )
        self.resets = OffsetResets(spec, self.snap, clients, membership, points)
        self.reach = Reachability(spec, clients, access, self._stopping)
        self.stalls = StallWatch()
        self._target_log = client_log("producer")
        self._target_repeats = repeats(self._target_log)  # client_log's, the first filter
        self._target_log.addFilter(TargetNoise(self.waits))
        quiet_repeated_logins(self._target_log)
        self._source_repeats: Repeats | None = None
        # --provenance.header.enable: the origin header each copy carries (kmirror.lineage.provenance).
        self._stamp: Stamp | None = None
        self._distrusted_warned = (0, 0.0)  # (count, monotonic time) at the last warning about them

    def _stopping(self) -> bool:
        return self._stop

    def _report_now(self) -> None:
        if self._report is not None:
            self._report(self.snapshot())

    def _subscribe(self, consumer: Consumer, topics: list[str]) -> None:
        self.membership.subscribe(consumer, topics)

    def _a_topic(self) -> str:
        return self.placement.a_topic()

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        self._stop = True

    def run(self) -> None:
        """Mirror until stopped; raise SendFailure (nothing committed past it) or another KmirrorError."""
        spec = self.spec
        clients = self.clients
        self._join()
        clients.producers = self._producers()
        clients.started(
            AdminClient({**admin_settings(spec.consumer), "logger": quiet}),
            AdminClient({**admin_settings(spec.producer), "logger": quiet}),
        )
        self.points.open()
        clean = False
        try:
            try:
                self._start()
                while not self._stop:
                    try:
                        self._loop()
                        break
                    except Stalled as exc:
                        self._replace_stalled(exc)
                    except Rejoin as exc:
                        self._rejoin(exc)
            except (KafkaException, KmirrorError) as exc:
                self.access.raise_if_unauthenticated(serve=True)  # the cause, when a login was refused
                self.access.raise_if_refused(exc)
                raise
            clean = self._drain(spec.shutdown_timeout_s)
            failure = self.failures.failure
            if clean:
                self._commit_positions(None)
            elif failure is not None:
                # The records handed over before the failed one still go to the target (within the
                # shutdown timeout): a restart then copies as few of them again as it can.
                self._deliver_before_stop(spec.shutdown_timeout_s)
                if failure.source_offset is None:
                    failure.source_offset = self.failures.locate(failure, self.placement)
            else:
                self.unacknowledged = clients.queued()
        finally:
            if clients.consumer is not None:
                clients.consumer.close()
            for p in clients.producers:
                p.flush(0)
            self.points.close()
        self.failures.raise_if_failed()
        self.clean = clean
        if not clean:
            # A stop during a target outage: exit 0 (the operator asked for it), commit nothing past
            # what the target acknowledged; the rest is mirrored again on restart.
            log.warning(
                "%s: stopped while the target was unreachable: %d records it has not acknowledged were not "
                "committed and will be mirrored again on restart",
                spec.label,
                self.unacknowledged,
            )

    def _start(self) -> None:
        """Wait for both clusters, then make the sync topic (``--groups``), read the cluster ids
        (``--provenance.header.enable``) and place the topics (which subscribes the consumer); a link that
        drops again during a step is waited out (:meth:`Reachability.retry`), a stop request ends it."""
        assert self._source_repeats is not None
        reach = self.reach
        reach.wait(self._source_repeats, self._target_repeats)
        if self.points.syncs is not None and not self._stop:
            reach.retry("making the sync topic", self.points.make_sync_topic)
        if self.spec.provenance and not self._stop:
            self._stamp = reach.retry("reading the cluster ids", self._provenance)
        if not self._stop:
            reach.retry("the first topic placement", self.placement.refresh)

    def _provenance(self) -> Stamp:
        """The origin stamp of this source and target, from their cluster ids."""
        ids = []
        for side, admin in (("source", self.clients.source_admin), ("target", self.clients.target_admin)):
            cluster_id = admin.list_topics(timeout=30).cluster_id
            if not cluster_id:
                raise KmirrorError(
                    f"{self.spec.label}: the {side} cluster reports no cluster id; "
                    "--provenance.header.enable needs one (Apache Kafka 0.10.1 or later)"
                )
            ids.append(cluster_id)
        if ids[0] == ids[1]:
            raise KmirrorError(
                f"{self.spec.label}: source and target are the same cluster ({ids[0]}): check "
                "bootstrap.servers in the consumer and producer files"
            )
        peers = ",".join(self.spec.provenance_peers) or "none"
        log.info(
            "%s: provenance headers on: source cluster %s, target cluster %s, peers honoured: %s",
            self.spec.label,
            *ids,
            peers,
        )
        return Stamp(ids[0], ids[1], self.spec.provenance_peers)

    def _distrusted(self, stamp: Stamp) -> None:
        """Records whose origin header was not honoured: counted, and one warning a minute at most (a
        hostile producer must not flood the log)."""
        self.snap.distrusted_origin = stamp.distrusted
        count, when = self._distrusted_warned
        now = time.monotonic()
        if stamp.last_distrusted is None or now - when < DISTRUSTED_WARN_S:
            return
        topic, partition, offset, value = stamp.last_distrusted
        claim = repr(value[:80]) if value is not None else "None"
        log.warning(
            "%s: %d record(s) carried a kmirror.origin header that is not honoured (latest: %s/%d offset %d, "
            "value %s): copied with kmirror's own origin; a forged header, or a mirror into the source that "
            "is not in --provenance.peers (docs/security.md)",
            self.spec.label,
            stamp.distrusted - count,
            topic,
            partition,
            offset,
            claim,
        )
        self._distrusted_warned = (stamp.distrusted, now)

    def _producers(self) -> list[Producer]:
        """The stream's producers, the producer queue shared among them."""
        spec = self.spec
        queue_size = int(spec.producer.get("queue.buffering.max.messages", 100_000))
        shares = queue_shares(queue_size, spec.num_producers)
        kbytes = spec.producer.get("queue.buffering.max.kbytes")
        producers = []
        for i, share in enumerate(shares):
            producer_conf: dict[str, Any] = client_conf(spec.producer)
            producer_conf["queue.buffering.max.messages"] = share
            if kbytes is not None:  # buffer.memory: per stream too (Java's producer holds it once)
                producer_conf["queue.buffering.max.kbytes"] = max(1, int(kbytes) // len(shares))
            producer_conf["on_delivery"] = self.failures.delivery_failed
            producer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
            producer_conf["stats_cb"] = self._producer_statistics(i)
            producer_conf["error_cb"] = self.access.error_cb("target")
            producers.append(Producer(producer_conf, logger=self._target_log))
        return producers

    def _join(self) -> None:
        """A consumer of the stream's group: at the start, and again after a fencing of its own doing."""
        spec = self.spec
        consumer_conf: dict[str, Any] = client_conf(spec.consumer)
        consumer_conf["statistics.interval.ms"] = STATISTICS_INTERVAL_MS
        consumer_conf["stats_cb"] = self._consumer_statistics
        consumer_conf["error_cb"] = self.access.error_cb("source")
        # Every offset reset comes to the stream, which knows whether it is a gap (kmirror.mirror.gaps).
        # It fetches a partition again with incremental_assign: cooperative-sticky only (the default).
        if cooperative(spec.consumer):
            consumer_conf["auto.offset.reset"] = "error"
        source_log = client_log("consumer")
        self._source_repeats = repeats(source_log)  # client_log's, the first filter
        quiet_repeated_logins(source_log)
        self.membership.joined(source_log)
        self.clients.consumer = Consumer(consumer_conf, logger=source_log)
        instance = spec.consumer.get("group.instance.id")
        log.info(
            "%s: member of group %s (%s)",
            spec.label,
            spec.consumer.get("group.id"),
            f"static, group.instance.id {instance}" if instance else "dynamic",
        )
        if not cooperative(spec.consumer):
            log.warning(
                "%s: partition.assignment.strategy=%s (eager): gaps in the source (records purged before "
                "they were mirrored) are not detected, the consumer jumps to auto.offset.reset; remove the "
                "line to use cooperative-sticky (docs/runbooks/source-gap.md)",
                spec.label,
                spec.consumer.get("partition.assignment.strategy"),
            )

    def _rejoin(self, exc: Rejoin) -> None:
        """librdkafka fenced its own consumer (see :class:`kmirror.mirror.membership.SessionWatch`): the
        partitions are lost, so nothing is committed; the records already handed over are delivered
        (fewer copied twice), the consumer is closed, and a new one joins under the same
        group.instance.id and resumes from the group's committed offsets."""
        spec = self.spec
        log.warning(
            "%s; joining the group again with a new consumer: the records of its partitions since the last "
            "commit are mirrored again",
            exc,
        )
        self._deliver_before_stop(spec.shutdown_timeout_s)
        self.membership.release_all()
        self.waits.forget()
        old, self.clients.consumer = self.clients.the_consumer(), None
        try:
            old.close()
        except (KafkaException, RuntimeError) as close_error:  # it is fatal already: nothing to keep
            log.debug("%s: closing the fenced consumer: %s", spec.label, close_error)
        self.placement.forget()  # the new consumer subscribes at its first refresh
        self._join()
        self.reach.retry("the topic placement after joining again", self.placement.refresh)

    def _replace_stalled(self, exc: Stalled) -> None:
        """Partitions the consumer stopped fetching (:mod:`kmirror.mirror.stalls`): commit what the target
        acknowledged, close the consumer (the group keeps a static member's partitions for it), and join
        with a new one under the same group.instance.id, which resumes from those offsets."""
        log.warning("%s; replacing the stream's consumer: it resumes from the offsets just committed", exc)
        self._commit_positions(None)
        self.stalls.acted()
        self.waits.forget()
        old, self.clients.consumer = self.clients.the_consumer(), None
        try:
            old.close()
        except (KafkaException, RuntimeError) as close_error:
            log.debug("%s: closing the stalled consumer: %s", self.spec.label, close_error)
        self.membership.release_all()
        self.placement.forget()  # the new consumer subscribes at its first refresh
        self._join()
        self.reach.retry("the topic placement after joining again", self.placement.refresh)

    def _deliver_before_stop(self, timeout: float) -> None:
        """Serve delivery reports until the producers are empty or ``timeout`` passes (error paths only:
        nothing is committed after this)."""
        deadline = time.monotonic() + timeout
        for p in self.clients.producers:
            p.flush(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------ hot path

    def _loop(self) -> None:  # noqa: PLR0912, PLR0915 - the per-record hot loop, one frame (make bench)
        spec = self.spec
        consumer = self.clients.the_consumer()
        consume = consumer.consume
        producers = self.clients.producers
        # A source partition always goes through the same producer (order); bound methods looked up once.
        produces = [producer.produce for producer in producers]
        n_producers = len(produces)
        placement, failures, membership, access, points = (
            self.placement,
            self.failures,
            self.membership,
            self.access,
            self.points,
        )
        hashed = placement.hashed  # updated in place by the placement
        batch_size = spec.batch_size
        rest = batch_size - 1
        snap = self.snap
        commit_every = spec.commit_interval_ms / 1000
        refresh_every = spec.topic_refresh_ms / 1000
        stats_every = spec.stats_interval_ms / 1000
        now = time.monotonic()
        next_commit, next_refresh, next_stats = now + commit_every, now + refresh_every, now + stats_every
        next_report = now + REPORT_INTERVAL_S
        counts = points.read_counts
        stamp = self._stamp
        dest = None if spec.rename.identity else placement.dest  # updated in place by the placement
        headers: Headers | None
        stalls = self.stalls
        while not self._stop:
            # What is fetched already, at once; when nothing is, wait for the first record, then take
            # what came with it (IDLE_WAIT_S: a batch never waits to fill up).
            batch = consume(batch_size, 0)
            if not batch:
                batch = consume(1, IDLE_WAIT_S)
                if batch and rest:
                    batch += consume(rest, 0)
            events = 0  # consumer events among the records (errors, offset resets): not records
            for m in batch:
                if m.error() is not None:
                    self._consumer_error(m)
                    events += 1
                    continue
                t = m.topic()
                p = m.partition()
                if stamp is None:
                    headers = m.headers()
                else:
                    headers = stamp(m, t, p)
                    if headers is None:  # its origin is the target: not copied back (counted)
                        if counts is not None:  # --groups: N counts copies (the pass below adds it back)
                            counts[(t, p)] = counts.get((t, p), 0) - 1
                        continue
                try:
                    produces[p % n_producers](
                        t if dest is None else dest[t],
                        m.value(),
                        m.key(),
                        -1 if t in hashed else p,
                        timestamp=max(m.timestamp()[1], 0),
                        headers=headers,
                    )
                except BufferError:
                    if not self._wait_for_room(m):
                        self.waits.hold_back(batch, m)
                        break
                except KafkaException as exc:
                    failures.produce_refused(m, exc)
                    if failures.failure is not None:
                        break
            if batch:
                snap.records_in += len(batch) - events
                if stamp is not None:
                    snap.skipped_origin = stamp.skipped
                    if stamp.distrusted != snap.distrusted_origin:
                        self._distrusted(stamp)
                if counts is not None:  # --groups only: one pass per batch, apart from the produce loop
                    for m in batch:
                        if m.error() is None:
                            key = (m.topic(), m.partition())
                            counts[key] = counts.get(key, 0) + 1
                newest = batch[-1].timestamp()[1]
                if newest > 0:
                    snap.latency.observe(max(0.0, time.time() - newest / 1000))
            if failures.failure is not None:
                return
            now = time.monotonic()
            if now >= next_commit:
                self._commit_positions(None)
                next_commit = now + commit_every
            if now >= next_refresh:
                placement.refresh_again()
                next_refresh = now + refresh_every
            if now >= next_stats:
                self._log_stats()
                next_stats = now + stats_every
            if not membership.assigned and now - membership.unassigned_since >= spec.unassigned_warn_s:
                membership.check_stuck(now)
            if self._report is not None and now >= next_report:
                self._report(self.snapshot())
                next_report = now + REPORT_INTERVAL_S
            for p_ in producers:
                p_.poll(0)
            if access.failed():
                access.raise_if_unauthenticated()
            points.raise_if_refused()
            if stalls.found:
                raise Stalled(
                    f"{spec.label}: fetching stopped on "
                    + ", ".join(f"{t}[{p}] for {s:.0f} s ({f.show()})" for (t, p), f, s in stalls.found)
                )

    def _consumer_error(self, m: Message) -> None:
        """An event the consumer returned instead of a record: an offset reset (:mod:`kmirror.mirror.gaps`),
        a refusal (stop), a fatal error (fenced: :meth:`Membership.fatal`), or a passing error (logged)."""
        err = m.error()
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            self.resets.offset_reset(m)
            return
        refused = self.access.consumer_refusal(err, m.topic())
        if refused is not None:  # librdkafka reports it and asks again for ever: it is definitive
            raise refused
        # librdkafka reports its fatal error (e.g. fenced) as an event of code _FATAL, not flagged fatal.
        if err.fatal() or err.code() == KafkaError._FATAL:
            raise self.membership.fatal(err)
        log.warning("%s: consumer: %s", self.spec.label, err.str())

    def _produce_one(self, m: Message) -> None:
        t, p = m.topic(), m.partition()
        stamp = self._stamp
        headers = m.headers() if stamp is None else stamp(m, t, p)
        if stamp is not None and stamp.distrusted != self.snap.distrusted_origin:
            self._distrusted(stamp)
        if headers is None and stamp is not None:
            self.snap.skipped_origin = stamp.skipped
            counts = self.points.read_counts
            if counts is not None:  # N counts copies (see _loop)
                counts[(t, p)] = counts.get((t, p), 0) - 1
            return  # its origin is the target: not copied back
        producers = self.clients.producers
        placement = self.placement
        producers[p % len(producers)].produce(
            t if self.spec.rename.identity else placement.dest[t],
            m.value(),
            m.key(),
            -1 if t in placement.hashed else p,
            timestamp=max(m.timestamp()[1], 0),
            headers=headers,
        )

    def _wait_for_room(self, m: Message) -> bool:
        """The producer queue is full: serve reports until the record fits (blocking back-pressure).
        False: it was not handed over (a send failure, or a stop request while the target is unreachable)."""

        def fits() -> bool:
            try:
                self._produce_one(m)
            except BufferError:
                return False
            except KafkaException as exc:
                self.failures.produce_refused(m, exc)
            return True

        if not self.waits.wait(fits) or self.failures.failure is not None:
            return False
        return self._produce_held()

    def _produce_held(self) -> bool:
        """Hand over the records the consumer returned while the stream was blocked (rare: a partition
        assigned during an outage whose first fetch raced its pause)."""
        held = self.waits.held
        while held:
            m = held.pop(0)
            if not self._wait_for_room(m):
                self.waits.hold_back([m, *held], m)
                held.clear()
                return False
        return True

    # ------------------------------------------------------------------ commit points

    def _drain(self, timeout: float | None, rebalance: bool = False) -> bool:
        """Wait until every produced record is acknowledged (or failed). False if time ran out, a record
        failed, or a stop was requested while the target is unreachable."""
        clients, waits, failures = self.clients, self.waits, self.failures
        if waits.waiting:  # a rebalance served while waiting for the target: no wait inside the wait
            return failures.failure is None and clients.queued() == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        while waits.wait(lambda: clients.queued() == 0, deadline, rebalance):
            if not waits.held:
                return failures.failure is None
            if not self._produce_held():
                return False
        return False

    def _commit_positions(self, partitions: list[TopicPartition] | None) -> None:
        """Flush, then commit the consumer's positions (everything before them is on the target)."""
        consumer = self.clients.the_consumer()
        if not self._drain(None, rebalance=partitions is not None):
            return
        self.snap.records_out = self.snap.records_in - self.snap.skipped_origin
        parts = consumer.assignment() if partitions is None else partitions
        if parts and self.points.commit(consumer, parts, self.placement.hashed, self.waits.unsent_from):
            self.snap.commits += 1

    # ------------------------------------------------------------------ reporting

    def _consumer_statistics(self, raw: str) -> None:
        """librdkafka's consumer statistics (every STATISTICS_INTERVAL_MS, from within a poll): metrics,
        and the stall watch, which starts again whenever the stream is blocked on its target."""
        stats = metrics.consumer_statistics(raw, self.snap)
        reading = self.waits.blocked_since is None and not self.waits.held
        self.stalls.observe(time.monotonic(), fetches(stats), reading)

    def _producer_statistics(self, index: int) -> Callable[[str], None]:
        def fold(raw: str) -> None:
            one = metrics.Snapshot(self.spec.source, self.spec.index)
            metrics.producer_statistics(raw, one)
            self._producer_stats[index] = (one.bytes_out, one.queue_depth)

        return fold

    def snapshot(self) -> metrics.Snapshot:
        """A copy of the counters as they are now (safe to hand to another thread or process)."""
        snap = self.snap
        snap.bytes_out = sum(b for b, _ in self._producer_stats.values())
        snap.queue_depth = sum(d for _, d in self._producer_stats.values())
        since = self.waits.blocked_since
        now = time.monotonic()
        snap.blocked_seconds = 0.0 if since is None else now - since
        snap.assigned_partitions = len(self.membership.assigned)
        snap.unassigned_seconds = self.membership.unassigned_for(now)
        snap.taken = time.time()
        return copy.deepcopy(snap)

    def _log_stats(self) -> None:
        current = self.snapshot()
        log.info("%s", metrics.stats_line(self.spec.label, current, self._last_stats))
        self._last_stats = current
