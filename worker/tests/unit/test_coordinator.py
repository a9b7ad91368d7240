"""kmirror.coordinator: group-coordinator requests in a helper process; what crosses the pipe, and a
helper that dies or fails is one error line, never the asking process's end. No broker: the helper asks
an address nothing listens on, and is killed for real."""

from __future__ import annotations

import io
import os
import signal
import socket
import threading
import time

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException, Node, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription, MemberAssignment, MemberDescription

from kmirror.coordinator import (
    CoordinatorCrashed,
    GroupAdmin,
    crash_line,
    decode_description,
    decode_error,
    encode_description,
    encode_error,
    read_frame,
    write_frame,
)
from kmirror.kafkaio import error_line

ASSERTION = (
    "python: rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed."
)


def nowhere() -> str:
    """An address nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_description_crosses_the_pipe_as_confluent_kafkas_own():
    members = [
        MemberDescription("m1", "rdkafka", "/10.0.0.1", MemberAssignment([TopicPartition("t", 0)]), "host-0"),
        MemberDescription("m2", "mm-1", "/10.0.0.2", MemberAssignment([]), None),
    ]
    d = ConsumerGroupDescription(
        "g", False, members, "cooperative-sticky", "STABLE", Node(2, "h", 9092), None, "CLASSIC"
    )
    back = decode_description(encode_description(d))
    assert back is not None
    assert back.group_id == "g" and back.partition_assignor == "cooperative-sticky"
    assert back.state == ConsumerGroupState.STABLE and back.type.name == "CLASSIC"
    assert back.coordinator.id == 2
    assert [(m.member_id, m.client_id, m.host, m.group_instance_id) for m in back.members] == [
        ("m1", "rdkafka", "/10.0.0.1", "host-0"),
        ("m2", "mm-1", "/10.0.0.2", None),
    ]
    assert [(tp.topic, tp.partition) for tp in back.members[0].assignment.topic_partitions] == [("t", 0)]
    assert back.members[1].assignment.topic_partitions == []
    assert decode_description(encode_description(None)) is None


def test_a_kafka_error_keeps_its_code_and_text_other_errors_become_one_line():
    exc = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied", retriable=False))
    back = decode_error(encode_error(exc))
    assert back.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED and error_line(back) == "denied"
    other = decode_error(encode_error(ValueError("bad\n  value")))
    assert other.args[0].code() == KafkaError._FAIL and error_line(other) == "ValueError: bad value"


def test_frames_round_trip_and_end():
    buf = io.BytesIO()
    write_frame(buf, ("describe_group", "g", 1.5))
    write_frame(buf, {"bootstrap.servers": "a:1"})
    buf.seek(0)
    assert read_frame(buf) == ("describe_group", "g", 1.5)
    assert read_frame(buf) == {"bootstrap.servers": "a:1"}
    with pytest.raises(EOFError):
        read_frame(buf)


def test_the_crash_line_names_the_signal_and_librdkafkas_assertion():
    line = crash_line("describe group of group 'g' on source east", -signal.SIGABRT, f"noise\n{ASSERTION}\n")
    assert line == (
        "describe group of group 'g' on source east: librdkafka's helper process died of SIGABRT "
        "(rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' "
        "failed.); librdkafka issue 4605"
    )
    assert "\n" not in line
    assert crash_line("x", None, "").endswith("did not answer in time (killed)")
    assert crash_line("x", 3, "Traceback\nImportError: no\n") == (
        "x: librdkafka's helper process exited with code 3 (ImportError: no)"
    )


def test_a_failed_request_is_its_kafka_error_and_the_helper_serves_the_next():
    with GroupAdmin({"bootstrap.servers": nowhere()}, "nowhere") as admin:
        with pytest.raises(KafkaException) as first:
            admin.describe_group("g", 1.0)
        assert not isinstance(first.value, CoordinatorCrashed)
        helper = admin._proc
        with pytest.raises(KafkaException):
            admin.group_state("g", 1.0)
        assert admin._proc is helper and helper is not None and helper.poll() is None
    assert helper.poll() is not None  # closed with the GroupAdmin


def test_a_helper_killed_mid_request_is_one_error_and_the_next_request_gets_a_new_helper():
    admin = GroupAdmin({"bootstrap.servers": nowhere()}, "source east")
    try:
        with pytest.raises(KafkaException):
            admin.describe_group("g", 0.5)  # the helper is up
        helper = admin._proc
        assert helper is not None
        threading.Timer(1.0, os.kill, (helper.pid, signal.SIGABRT)).start()
        started = time.monotonic()
        with pytest.raises(CoordinatorCrashed) as crashed:
            admin.committed_offsets("g", 20.0)
        assert time.monotonic() - started < 10
        assert error_line(crashed.value) == (
            "committed offsets of group 'g' on source east: librdkafka's helper process died of SIGABRT; "
            "librdkafka issue 4605"
        )
        with pytest.raises(KafkaException) as again:
            admin.describe_group("g", 0.5)
        assert not isinstance(again.value, CoordinatorCrashed)
        assert admin._proc is not None and admin._proc is not helper
    finally:
        admin.close()
