"""What the audit is doing, on stderr while it runs: the offsets planned per cluster and topic, the
progress of Spark's reading and matching stages, and each topic's result. One line each, prefixed
``kmirror audit:`` (stdout keeps the summary and the report's path)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

from kmirror.audit.scope import SIDES, Span

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JOB_GROUP = "kmirror-audit"
STAGES = ("reading", "matching")  # the job's stages in the order Spark runs them


class Progress:
    def __init__(self, stream: TextIO | None = None, interval_s: float = 10.0) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self._lock = threading.Lock()

    def say(self, message: str) -> None:
        out = self.stream or sys.stderr
        with self._lock:
            out.write(f"kmirror audit: {message}\n")
            out.flush()

    def planned(self, spans: Sequence[Span], names: Sequence[str]) -> None:
        """One line per cluster and topic: partitions and offsets to read."""
        for side, name in enumerate(SIDES):
            mine = [s for s in spans if s.side == side]
            topics = sorted({s.topic for s in mine})
            self.say(
                f"{name} {names[side]}: {len(topics)} topic(s), "
                f"{len({(s.topic, s.partition) for s in mine})} partition(s), "
                f"{sum(s.size for s in mine):,} offsets to read"
            )
            for t in topics:
                of = [s for s in mine if s.topic == t]
                self.say(
                    f"reading {name} {names[side]} topic {t}: {len(of)} partition(s), "
                    f"{sum(s.size for s in of):,} offsets"
                )

    @contextlib.contextmanager
    def stages(self, spark: SparkSession) -> Iterator[None]:
        """While the body runs Spark's job (in job group JOB_GROUP): a line per stage when it starts,
        then its tasks done at most every `interval_s`, and when it ends (also when it ended between
        two looks)."""
        sc = spark.sparkContext
        sc.setJobGroup(JOB_GROUP, "kmirror audit: read both clusters, match the digests")
        done = threading.Event()
        said: dict[int, tuple[str, int, float]] = {}  # stage id: (name, tasks done when last said, when)

        def look(final: bool) -> None:
            tracker = sc.statusTracker()
            stage_ids = sorted(
                {s for j in tracker.getJobIdsForGroup(JOB_GROUP) for s in _stages_of(tracker, j)}
            )
            for stage_id in stage_ids:
                info = tracker.getStageInfo(stage_id)
                # A stage that never ran is skipped (under adaptive execution the matching job lists
                # the reading stage again, its output already there): named once a task ran.
                if info is None or (
                    stage_id not in said and not info.numActiveTasks + info.numCompletedTasks
                ):
                    continue
                now = time.monotonic()
                if stage_id not in said:
                    name = STAGES[min(len(said), len(STAGES) - 1)]
                    self.say(f"{name}: {info.numTasks} Spark task(s)")
                    said[stage_id] = (name, 0, now)
                name, reported, when = said[stage_id]
                complete = info.numCompletedTasks
                ended = complete >= info.numTasks
                if complete != reported and (ended or final or now - when >= self.interval_s):
                    self.say(f"{name}: {complete}/{info.numTasks} task(s) done")
                    said[stage_id] = (name, complete, now)

        def watch() -> None:
            while not done.wait(1.0):
                try:
                    look(final=False)
                except Exception:  # progress must never stop the audit
                    return

        t = threading.Thread(target=watch, name="audit-progress", daemon=True)
        t.start()
        try:
            yield
        finally:
            done.set()
            t.join(5)
            with contextlib.suppress(Exception):  # the report matters, not the last progress line
                look(final=True)
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def topics(self, report: Mapping[str, object]) -> None:
        """One line per topic: its counts and verdict."""
        for row in report["topics"]:  # type: ignore[attr-defined]
            lost = row.get("lost_in_gaps", 0)
            bad = row["missing"] or row["duplicated"] or lost
            self.say(
                f"topic {row['topic']}: {row['source_records']:,} source, {row['target_records']:,} target "
                f"records; {row['missing']:,} missing, {row['duplicated']:,} duplicated, "
                f"{row['unexpected']:,} unexpected, {row['in_flight']:,} in flight"
                f"{f', {lost:,} lost on the source before mirroring' if lost else ''}: "
                f"{'INCOMPLETE' if bad else 'complete'}"
            )


def _stages_of(tracker: object, job_id: int) -> list[int]:
    info = tracker.getJobInfo(job_id)  # type: ignore[attr-defined]
    return list(info.stageIds) if info is not None else []
