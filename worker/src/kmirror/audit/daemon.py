"""Spark's Python daemon for the audit (``spark.python.daemon.module``): pyspark's own daemon, with the
modules every audit task needs imported once before it forks the workers, so that no worker imports
pyarrow, numpy, confluent-kafka and the audit's code again (half a second of CPU each, measured)."""

from __future__ import annotations

import confluent_kafka  # noqa: F401
import numpy  # noqa: F401
import pyarrow  # noqa: F401
import pyspark.sql.worker.plan_data_source_read
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import kmirror.audit.match
import kmirror.audit.source  # noqa: F401

if __name__ == "__main__":
    manager()
