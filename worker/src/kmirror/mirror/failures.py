"""A stream's failed sends: recorded (stop before the next commit, or skip when allowed), located at their
source offset for the operator, and librdkafka's connection noise while the target is away."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from kmirror.authorization import authorization_error, producer_refusal
from kmirror.config import client_conf
from kmirror.errors import ConfigError, KmirrorError, SendFailure
from kmirror.kafkaio import client_log
from kmirror.mirror.membership import Rejoin
from kmirror.mirror.spec import Failure
from kmirror.mirror.state import StreamState

log = logging.getLogger("kmirror.mirror.engine")


class SendFailures(StreamState):
    """Mixin of :class:`kmirror.mirror.engine.Stream`: what happens when the target refuses a record."""

    def _produce_refused(self, m: Message, exc: KafkaException) -> None:
        """produce() refused a record outright (e.g. over message.max.bytes): a non-retriable failure."""
        err = exc.args[0]
        failure = Failure(err, m.topic(), m.partition(), m.offset(), m.key(), m.timestamp()[1])
        self._record_failure(failure)

    def _delivery_failed(self, err: KafkaError | None, msg: Message) -> None:
        """Called by librdkafka only for failed deliveries (delivery.report.only.error)."""
        if err is None:
            return
        topic, partition = msg.topic(), msg.partition()
        # Failures name the source topic (the destination's name differs with --topic.rename.format).
        topic = self.spec.rename.source_topic(topic) or topic
        self._record_failure(Failure(err, topic, partition, None, msg.key(), msg.timestamp()[1], msg.value()))

    def _record_failure(self, failure: Failure) -> None:
        self.snap.send_errors += 1
        if authorization_error(failure.error) is not None:
            # Not the record's fault: every record of the topic would be refused. Stop, even with
            # --abort.on.send.failure=false, before the next commit.
            if self._failure is None or authorization_error(self._failure.error) is None:
                self._failure = failure
            self._stop = True
            return
        if not self.spec.abort_on_send_failure:
            log.error(
                "%s: %s; record skipped (--abort.on.send.failure=false): it is NOT on the target",
                self.spec.label,
                failure.describe(self.spec.source),
            )
            return
        if self._failure is None:
            self._failure = failure
            self._stop = True

    def _message_error(self, m: Message) -> None:
        err = m.error()
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            self._offset_reset(m)
            return
        refused = self._consumer_refusal(err, m.topic())
        if refused is not None:  # librdkafka reports it and asks again for ever: it is definitive
            raise refused
        # librdkafka reports its fatal error (e.g. fenced) as an event of code _FATAL, not flagged fatal.
        if err.fatal() or err.code() == KafkaError._FATAL:
            c = self.spec.consumer
            if c.get("group.instance.id") and (
                "group.instance.id" in err.str() or "fenced" in err.str().lower()
            ):
                if self._self_fenced():
                    raise Rejoin(
                        f"{self.spec.label}: fenced by its own rejoin after its group session timed out "
                        f"({err.str()})"
                    )
                # Static members (the default) of one id: the newer one fences the older, which stops for
                # good (exit 2: a restart would only fence the other one in turn).
                raise ConfigError(
                    f"fenced: another consumer of group {c.get('group.id')} joined with the same "
                    f"group.instance.id {c.get('group.instance.id')} (a second kmirror process reading the "
                    "same consumer file on this host, or another host with the same host name)",
                    origin=self.spec.label,
                    key="group.instance.id",
                    fix="give each process its own consumer file or its own group.instance.id in it, or run "
                    "with --static.membership false",
                )
            raise KmirrorError(f"{self.spec.label}: fatal consumer error: {err.str()}")
        log.warning("%s: consumer: %s", self.spec.label, err.str())

    def _raise_if_failed(self) -> None:
        f = self._failure
        if f is None:
            return
        if self._refused is not None:  # the producer's idempotence refused: its records failed with it
            raise self._refused.error(self.spec.label)
        if authorization_error(f.error) is not None:
            where = "target cluster"
            dest = self.spec.rename(f.topic)
            raise producer_refusal(f.error, where, self.spec.producer, dest).error(self.spec.label)
        raise SendFailure(
            f"{self.spec.label}: {f.describe(self.spec.source)}; nothing after the last commit "
            "was committed: fix the cause and restart, the mirror resumes from there"
        )

    def _locate(self, f: Failure) -> int | None:
        """Find the source offset of a record that failed asynchronously (error path only).

        It lies between the group's committed offset and the current position of its partition
        (identity routing) or of some partition of its topic (key-hash routing). The reader only
        assigns partitions: it never joins the group and never commits.
        """
        consumer = self.consumer
        if consumer is None or authorization_error(f.error) is not None:  # the line names no record then
            return None
        candidates = (
            [f.partition] if f.topic not in self._hashed else list(range(self._selected.get(f.topic, 0)))
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


class TargetNoise(logging.Filter):
    """librdkafka's producer logs a connection failure every few seconds while the target is away, and
    calls a timed-out ApiVersionRequest "probably due to broker version < 0.10". While the stream is
    blocked its own line ("target unreachable since T, N records waiting, reading paused") says it
    once per stats interval; before that, the misleading guess is cut from the line."""

    _CONNECTION = re.compile(r"\b(FAIL|REQTMOUT|APIVERSION|ERROR)\b|Timed out|timed out|Disconnected")
    _GUESS = re.compile(r":? ?probably due to broker version < 0\.10 \(see api\.version\.request [a-z]+\)")

    def __init__(self, stream: Any) -> None:  # a kmirror.mirror.engine.Stream
        super().__init__()
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.stream._blocked_since is not None and self._CONNECTION.search(text):
            return False
        if "broker version < 0.10" in text:
            record.msg, record.args = self._GUESS.sub("", text), ()
        return True


quiet = client_log("admin")
