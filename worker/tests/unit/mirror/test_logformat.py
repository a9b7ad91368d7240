"""kmirror.mirror.logformat: text lines for people, one JSON object per line for log shippers."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from kmirror.mirror.logformat import JsonFormatter, setup_logging
from kmirror.options import build_parser


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_line_has_the_fields_and_stays_one_line():
    record = logging.LogRecord("kmirror.mirror.engine", logging.WARNING, __file__, 1, "a\nb %s", ("é",), None)
    record.processName = "stream-east#0"
    line = JsonFormatter().format(record)
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["level"] == "WARNING" and doc["logger"] == "kmirror.mirror.engine"
    assert doc["process"] == "stream-east#0" and doc["message"] == "a\nb é"
    assert doc["time"].endswith("+00:00") and "T" in doc["time"]


def test_json_line_carries_the_exception():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    doc = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in doc["exception"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_setup_logging_writes_the_format_asked(capsys, fmt):
    setup_logging("INFO", fmt)
    logging.getLogger("kmirror.test").info("hello %d", 7)
    logging.getLogger("kmirror.librdkafka").info("not shown below WARNING")
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    if fmt == "json":
        assert json.loads(line)["message"] == "hello 7"
    else:
        assert line.endswith(" INFO MainProcess kmirror.test: hello 7")


def test_run_option():
    parser = build_parser()
    base = ["run", "--consumer.config", "c", "--producer.config", "p"]
    assert parser.parse_args(base).log_format == "text"
    assert parser.parse_args([*base, "--log.format", "json"]).log_format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--log.format", "xml"])
