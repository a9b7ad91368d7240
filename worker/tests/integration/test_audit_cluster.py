"""The audit on a real Spark standalone cluster: a master and two workers started on this machine from
pyspark's own launch classes (`org.apache.spark.deploy.master.Master`, `...worker.Worker`), with small
memory and one core each. `kmirror audit --master spark://...` and the same job through spark-submit
give the report that `local[*]` gives, with every executor of the cluster doing part of the reading.

The cluster is shared by the tests of this module; the data is small (the planted differences of
test_audit.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from mirror_harness import consumer_file, producer_file
from test_audit import BASE_TS, audit_cli, located, plant

from kmirror.audit import job
from kmirror.testing.embedded import free_port

pytestmark = pytest.mark.audit

SPARK_HOME = Path(pyspark.__file__).parent
# What Spark's own scripts (load-spark-env.sh) set: a worker needs it to build its executors' command.
SCALA = next(SPARK_HOME.glob("jars/spark-core_*.jar")).name.split("_")[1].split("-")[0]
KINDS = ("missing_records", "duplicated_records", "unexpected_records", "in_flight_records")


class Standalone:
    """A Spark standalone master and its workers, each a JVM of its own, all on 127.0.0.1."""

    def __init__(self, base: Path, workers: int = 2) -> None:
        self.base = base
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers = workers

    def _java(self, name: str, cls: str, *args: str) -> None:
        java = shutil.which("java", path=os.path.join(os.environ.get("JAVA_HOME", ""), "bin")) or "java"
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_SCALA_VERSION": SCALA,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        log = (self.base / f"{name}.log").open("wb")
        cmd = [java, "-Xmx256m", "-cp", f"{SPARK_HOME}/jars/*", cls, *args]
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env))

    def state(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
            return json.load(r)  # type: ignore[no-any-return]

    def start(self) -> Standalone:
        self._java(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui),
        )  # fmt: skip
        for i in range(self.workers):
            work = self.base / f"worker{i}"
            work.mkdir()
            self._java(
                f"worker{i}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                "--work-dir", str(work), self.url,
            )  # fmt: skip
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if self.state().get("aliveworkers") == self.workers:
                    return self
            except OSError:
                pass
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited: {p.args}; logs in {self.base}")
            time.sleep(0.5)
        raise RuntimeError(
            f"the Spark cluster did not get {self.workers} workers in 300 s; logs in {self.base}"
        )

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def tasks_run(self) -> list[int]:
        """Per worker: how many of its executors (one per application) ran Spark tasks, from the
        executors' own logs in the worker's work directory."""
        counts = []
        for i in range(self.workers):
            logs = (self.base / f"worker{i}").glob("app-*/*/stderr")
            counts.append(sum("Running task" in p.read_text(errors="replace") for p in logs))
        return counts


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    c = Standalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield c.start()
    finally:
        c.stop()


def comparable(rep: dict[str, object]) -> dict[str, object]:
    """The report less what depends on the run (time, where Spark ran, how long it took)."""
    return {k: v for k, v in rep.items() if k not in ("generated_at", "window", "timings_s", "spark")}


def test_standalone_cluster_gives_the_local_result(kafka, cluster, tmp_path):
    missing, dups, unexpected, n_source = plant(kafka)
    src = consumer_file(tmp_path, kafka["source"])
    tgt = producer_file(tmp_path, kafka["target"])
    common = [
        "--source.config", str(src), "--target.config", str(tgt), "--topics", "orders|payments",
        "--bucket", "1m", "--range-size", "50", "--to", str(BASE_TS + 3_600_000),
    ]  # fmt: skip
    executor = ["--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1"]
    reports = {}
    runs = {
        "local": [*common, "--output", str(tmp_path / "local"), "--master", "local[*]"],
        "cluster": [*common, "--output", str(tmp_path / "cluster"), "--master", cluster.url, *executor],
    }
    for name, args in runs.items():
        out = audit_cli(args)
        assert out.returncode == 1, out.stdout + out.stderr
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    spark_submit = Path(sys.executable).parent / "spark-submit"
    submit = [
        str(spark_submit), "--master", cluster.url, "--driver-memory", "512m", "--executor-memory", "512m",
        "--conf", "spark.driver.host=127.0.0.1", job.__file__,
    ]  # fmt: skip
    out = audit_cli([*common, "--output", str(tmp_path / "submitted")], runner=submit)
    assert out.returncode == 1, out.stdout + out.stderr
    reports["submitted"] = json.loads((tmp_path / "submitted" / "report.json").read_text())

    local = reports["local"]
    assert local["spark"]["master"] == "local[*]"
    assert located(local, "missing_records") == missing
    assert located(local, "duplicated_records") == dups
    assert located(local, "unexpected_records") == unexpected
    assert local["totals"]["source_records"] == n_source
    for name in ("cluster", "submitted"):
        rep = reports[name]
        assert rep["spark"]["master"] == cluster.url
        assert comparable(rep) == comparable(local), name
    # Each worker's executor ran tasks for both applications on the cluster: the reading was spread.
    assert cluster.tasks_run() == [2, 2]
