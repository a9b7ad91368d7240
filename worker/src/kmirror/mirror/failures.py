"""A stream's failed sends: recorded (stop before the next commit, or skip when allowed), located at their
source offset for the operator."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from kmirror.authorization import authorization_error, producer_refusal
from kmirror.config import client_conf
from kmirror.errors import SendFailure
from kmirror.kafkaio import client_log
from kmirror.mirror import metrics
from kmirror.mirror.authfail import Access
from kmirror.mirror.clients import Clients
from kmirror.mirror.placement import Placement
from kmirror.mirror.spec import Failure, StreamSpec

log = logging.getLogger(__name__)


class SendFailures:
    """What happens when the target refuses a record: the first failure is kept and the stream stops before
    its next commit (or, with ``--abort.on.send.failure=false``, the record is skipped and said)."""

    def __init__(
        self,
        spec: StreamSpec,
        snap: metrics.Snapshot,
        clients: Clients,
        access: Access,
        stop: Callable[[], None],
    ) -> None:
        self.spec = spec
        self.snap = snap
        self.clients = clients
        self.access = access
        self.stop = stop  # the stream's stop request
        self.failure: Failure | None = None

    def produce_refused(self, m: Message, exc: KafkaException) -> None:
        """produce() refused a record outright (e.g. over message.max.bytes): a non-retriable failure."""
        err = exc.args[0]
        failure = Failure(err, m.topic(), m.partition(), m.offset(), m.key(), m.timestamp()[1])
        self.record(failure)

    def delivery_failed(self, err: KafkaError | None, msg: Message) -> None:
        """Called by librdkafka only for failed deliveries (delivery.report.only.error)."""
        if err is None:
            return
        topic, partition = msg.topic(), msg.partition()
        # Failures name the source topic (the destination's name differs with --topic.rename.format).
        topic = self.spec.rename.source_topic(topic) or topic
        self.record(Failure(err, topic, partition, None, msg.key(), msg.timestamp()[1], msg.value()))

    def record(self, failure: Failure) -> None:
        self.snap.send_errors += 1
        if authorization_error(failure.error) is not None:
            # Not the record's fault: every record of the topic would be refused. Stop, even with
            # --abort.on.send.failure=false, before the next commit.
            if self.failure is None or authorization_error(self.failure.error) is None:
                self.failure = failure
            self.stop()
            return
        if not self.spec.abort_on_send_failure:
            log.error(
                "%s: %s; record skipped (--abort.on.send.failure=false): it is NOT on the target",
                self.spec.label,
                failure.describe(self.spec.source),
            )
            return
        if self.failure is None:
            self.failure = failure
            self.stop()

    def raise_if_failed(self) -> None:
        f = self.failure
        if f is None:
            return
        if self.access.refused is not None:  # the producer's idempotence refused: its records failed with it
            raise self.access.refused.error(self.spec.label)
        if authorization_error(f.error) is not None:
            where = "target cluster"
            dest = self.spec.rename(f.topic)
            raise producer_refusal(f.error, where, self.spec.producer, dest).error(self.spec.label)
        raise SendFailure(
            f"{self.spec.label}: {f.describe(self.spec.source)}; nothing after the last commit "
            "was committed: fix the cause and restart, the mirror resumes from there"
        )

    def locate(self, f: Failure, placement: Placement) -> int | None:
        """Find the source offset of a record that failed asynchronously (error path only).

        It lies between the group's committed offset and the current position of its partition
        (identity routing) or of some partition of its topic (key-hash routing). The reader only
        assigns partitions: it never joins the group and never commits.
        """
        consumer = self.clients.consumer
        if consumer is None or authorization_error(f.error) is not None:  # the line names no record then
            return None
        candidates = (
            [f.partition]
            if f.topic not in placement.hashed
            else list(range(placement.selected.get(f.topic, 0)))
        )
        conf = client_conf(self.spec.consumer)
        conf["enable.partition.eof"] = True
        reader = Consumer(conf, logger=quiet)
        try:
            ends = {
                tp.partition: tp.offset
                for tp in consumer.position([TopicPartition(f.topic, p) for p in candidates])
            }
            for tp in reader.committed([TopicPartition(f.topic, p) for p in candidates], timeout=10):
                start = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                reader.assign([TopicPartition(f.topic, tp.partition, start)])
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    m = reader.poll(0.5)
                    if m is None:
                        continue
                    if m.error() is not None or m.offset() >= ends.get(tp.partition, 0):
                        break
                    # librdkafka does not keep the timestamp on a failed delivery report (-1).
                    same_time = f.timestamp is None or f.timestamp < 0 or m.timestamp()[1] == f.timestamp
                    if m.key() == f.key and m.value() == f.value and same_time:
                        f.partition = tp.partition
                        return m.offset()
        except KafkaException as exc:
            log.warning("%s: could not find the failed record's source offset: %s", self.spec.label, exc)
        finally:
            reader.close()
        return None


quiet = client_log("admin")
