"""kmirror.mirror.engine: librdkafka's connection noise about an unreachable target is replaced by the
stream's own blocked line; --queue.size is records per stream, its producers share it (queue_shares)."""

from __future__ import annotations

import logging

import pytest

from kmirror.config.filters import TopicFilter
from kmirror.mirror.engine import Stream, StreamSpec, queue_shares

API_VERSION = (
    "FAIL [rdkafka#producer-1] 127.0.0.1:9092/111: ApiVersionRequest failed: Local: Timed out: probably "
    "due to broker version < 0.10 (see api.version.request configuration) "
    "(after 10008ms in state APIVERSION_QUERY)"
)
REQUEST_TIMEOUT = (
    "REQTMOUT [rdkafka#producer-1] 127.0.0.1:9092/111: Timed out ProduceRequest in flight (after 30000ms)"
)


@pytest.fixture
def stream() -> Stream:
    spec = StreamSpec("east", 0, {}, {}, TopicFilter(".*", None))
    return Stream(spec)


def passes(stream: Stream, text: str) -> logging.LogRecord | None:
    record = logging.LogRecord("kmirror.librdkafka.producer", logging.WARNING, __file__, 1, text, (), None)
    logger = logging.getLogger("kmirror.librdkafka.producer")
    return (
        record
        if all(f.filter(record) for f in logger.filters if getattr(f, "waits", None) is stream.waits)
        else None
    )


def test_while_blocked_connection_noise_is_dropped(stream):
    stream.waits.blocked_since = 1.0
    assert passes(stream, API_VERSION) is None
    assert passes(stream, REQUEST_TIMEOUT) is None


def test_before_blocking_the_misleading_broker_version_guess_is_cut(stream):
    record = passes(stream, API_VERSION)
    assert record is not None
    text = record.getMessage()
    assert "broker version" not in text
    assert "ApiVersionRequest failed: Local: Timed out (after 10008ms in state APIVERSION_QUERY)" in text


def test_other_lines_pass_unchanged(stream):
    text = "THROTTLE [rdkafka#producer-1] 127.0.0.1:9092/111: throttled by 100ms"
    record = passes(stream, text)
    assert record is not None and record.getMessage() == text


# --- --queue.size: the producers' shares


@pytest.mark.parametrize(
    ("records", "producers", "shares"),
    [
        (10_000, 2, [5_000, 5_000]),
        (10_001, 2, [5_001, 5_000]),
        (10, 3, [4, 3, 3]),
        (7, 1, [7]),
        (1, 2, [1]),  # fewer records than producers: one producer per record, never a 0 (no limit) share
        (3, 5, [1, 1, 1]),
    ],
)
def test_shares_add_up_to_the_stream_queue_and_none_is_unlimited(records, producers, shares):
    got = queue_shares(records, producers)
    assert got == shares
    assert sum(got) == records
    assert all(s >= 1 for s in got)


def test_no_limit_in_the_file_stays_no_limit_for_every_producer():
    assert queue_shares(0, 2) == [0, 0]
