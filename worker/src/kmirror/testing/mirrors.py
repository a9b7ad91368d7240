"""A `kmirror run` for the demo, tests and benchmarks: its two properties files and its command line."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path


def mirror_files(
    workdir: Path, group: str, source: str, target: str, consumer: Mapping[str, object] | None = None
) -> tuple[Path, Path]:
    """`{group}-consumer.properties` (the source's brokers, group.id=group, then `consumer`) and
    `{group}-producer.properties` (the target's brokers) in workdir."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfile = workdir / f"{group}-consumer.properties"
    extra = "".join(f"{k}={v}\n" for k, v in (consumer or {}).items())
    cfile.write_text(f"bootstrap.servers={source}\ngroup.id={group}\n{extra}")
    pfile = workdir / f"{group}-producer.properties"
    pfile.write_text(f"bootstrap.servers={target}\n")
    return cfile, pfile


def run_command(
    consumer: Path, producer: Path, topics: str, *options: str, python: str = sys.executable
) -> list[str]:
    """``python -m kmirror run`` with the two files, the topic filter and more options."""
    return [
        python,
        "-m",
        "kmirror",
        "run",
        "--consumer.config",
        str(consumer),
        "--producer.config",
        str(producer),
        "--whitelist",
        topics,
        *options,
    ]
