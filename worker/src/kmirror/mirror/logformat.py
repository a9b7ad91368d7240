"""How kmirror's log lines look: text for people (the default), or one JSON object per line for log
shippers (``--log.format json``: Fluent Bit, Vector, Filebeat, journald's JSON readers)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

TEXT_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"
FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601, milliseconds), level, process (the supervisor
    ``MainProcess`` or a stream ``stream-SOURCE#N``), logger, message, and the exception's text if any.
    A message with a newline stays one line (JSON escapes it)."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "process": record.processName,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def setup_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr at `level` in format `fmt` (text or json); librdkafka's own lines from WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.getLogger("kmirror.librdkafka").setLevel(logging.WARNING)
