"""The completeness audit (``kmirror audit``): a PySpark job comparing a source cluster with its mirror.

:mod:`~kmirror.audit.scope`, :mod:`~kmirror.audit.diff` and :mod:`~kmirror.audit.report` are pure;
:mod:`~kmirror.audit.kafka` plans offsets on the driver; :mod:`~kmirror.audit.source` is the Spark data
source that reads Kafka in executors; :mod:`~kmirror.audit.spark` holds the two Spark phases;
:mod:`~kmirror.audit.job` is the command (also ``python -m kmirror.audit`` and spark-submit's script).
Nothing here imports pyspark until a Spark session is made.
"""

from kmirror.audit.job import COMMANDS, cmd_audit, main, register

__all__ = ["COMMANDS", "cmd_audit", "main", "register"]
