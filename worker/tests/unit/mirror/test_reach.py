"""kmirror.mirror.reach: a start-up step after the wait for both clusters (the sync topic, the cluster ids,
the first topic placement) is asked again while a dropped link makes it fail, in one line per stats
interval; a refusal or a fatal error still stops the stream, a stop request ends the wait."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmirror.config.filters import TopicFilter
from kmirror.mirror import reach
from kmirror.mirror.authfail import Access
from kmirror.mirror.clients import Clients
from kmirror.mirror.reach import Reachability
from kmirror.mirror.spec import StreamSpec

CUT = KafkaException(
    KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure")
)


class Step:
    """A start-up step that fails `failures` times with `error`, then answers (calls counted)."""

    def __init__(self, failures: int, error: KafkaException = CUT) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "placed"


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> tuple[Reachability, list[bool]]:
    monkeypatch.setattr(reach, "RETRY_S", 0.0)
    spec = StreamSpec("east", 0, {}, {}, TopicFilter(".*", None), stats_interval_ms=60_000)
    clients = Clients()
    stop = [False]
    return Reachability(spec, clients, Access(spec, clients, lambda: "t"), lambda: stop[0]), stop


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kmirror.mirror.reach"]


def test_a_step_that_fails_on_the_way_is_asked_again_in_one_line_per_interval(waits, caplog):
    r, _ = waits
    step = Step(failures=50)
    with caplog.at_level(logging.INFO, logger="kmirror.mirror.reach"):
        assert r.retry("the first topic placement", step) == "placed"
    assert step.calls == 51
    said = lines(caplog)
    assert len(said) == 2, said
    assert said[0].startswith("east#0: the first topic placement failing since ")
    assert "Failed to get metadata: Local: Broker transport failure; retrying" in said[0]
    assert said[1].startswith("east#0: the first topic placement done after ")


def test_a_step_that_answers_at_once_says_nothing(waits, caplog):
    r, _ = waits
    with caplog.at_level(logging.INFO, logger="kmirror.mirror.reach"):
        assert r.retry("making the sync topic", Step(failures=0)) == "placed"
    assert lines(caplog) == []


@pytest.mark.parametrize(
    "error",
    [
        KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")),
        KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True)),
    ],
    ids=["refused", "fatal"],
)
def test_a_refusal_or_a_fatal_error_is_not_waited_out(waits, error):
    r, _ = waits
    step = Step(failures=1, error=error)
    with pytest.raises(KafkaException):
        r.retry("the first topic placement", step)
    assert step.calls == 1


def test_a_stop_request_ends_the_retries(waits):
    r, stop = waits

    def step() -> str:
        stop[0] = True  # SIGTERM while the request was on its way
        raise CUT

    assert r.retry("the first topic placement", step) is None
    assert r.retry("the first topic placement", Step(failures=0)) is None  # stopped: not asked at all
