"""The clusters of the demo, the molecule scenarios and the deployment tests: one place starts and stops them.

Each cluster is an Apache Kafka cluster (KRaft, from Kafka's own pinned jars: :mod:`kmirror.testing.kafka`),
started on free ports, waited for, and killed on exit even when the caller fails. ``clusters(...)`` takes
:class:`~kmirror.testing.kafka.KafkaCluster`'s options (``size=3``, ``line="3.9"``, ``security=...``).

Command line (for shell scripts, molecule and the demo)::

    python -m kmirror.testing.embedded up --state-dir DIR [--host 127.0.0.1] [--line 4.3] NAME [NAME ...]
    python -m kmirror.testing.embedded down --state-dir DIR

``up`` writes ``DIR/clusters.json`` ({name: "host:port"}) and leaves the brokers running (their logs and
data under DIR); ``down`` stops them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from kmirror.errors import KmirrorError
from kmirror.testing import jars
from kmirror.testing.kafka import KafkaCluster, free_port, kafka_clusters, start_together

Cluster = KafkaCluster

__all__ = ["Cluster", "clusters", "free_port", "main"]


@contextlib.contextmanager
def clusters(
    *names: str, host: str = "127.0.0.1", log_dir: Path | None = None, **options: object
) -> Iterator[dict[str, Cluster]]:
    """Start one cluster per name (side by side); stop them all on exit, whatever happened."""
    with kafka_clusters(*names, host=host, log_dir=log_dir, **options) as started:
        yield started


# ---------------------------------------------------------------------------------------------- CLI


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def _up(state: Path, names: list[str], host: str, line: str) -> dict[str, str]:
    state.mkdir(parents=True, exist_ok=True)
    started = {n: KafkaCluster(n, host, line=line) for n in names}
    start_together(list(started.values()), state)  # stops them all if one fails
    info = {n: {"bootstrap": c.bootstrap, "pids": c.pids} for n, c in started.items()}
    (state / "brokers.json").write_text(json.dumps(info, indent=2))
    bootstraps = {n: c.bootstrap for n, c in started.items()}
    (state / "clusters.json").write_text(json.dumps(bootstraps, indent=2))
    return bootstraps


def _down(state: Path) -> None:
    path = state / "brokers.json"
    if not path.exists():
        return
    for v in json.loads(path.read_text()).values():
        _kill([int(p) for p in v.get("pids", [])])
    path.unlink()
    (state / "clusters.json").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kmirror.testing.embedded",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start clusters and leave them running")
    up.add_argument("--state-dir", required=True, type=Path)
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--line", default=jars.MAIN_LINE, choices=jars.LINES, help="the Apache Kafka line")
    up.add_argument("names", nargs="+")
    down = sub.add_parser("down", help="stop the clusters started by up")
    down.add_argument("--state-dir", required=True, type=Path)
    a = p.parse_args(argv)
    try:
        if a.cmd == "up":
            print(json.dumps(_up(a.state_dir, a.names, a.host, a.line)))
        else:
            _down(a.state_dir)
    except KmirrorError as exc:
        print(f"kmirror.testing.embedded: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
