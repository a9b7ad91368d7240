"""docs/benchmarks.md is written by several benchmarks, each owning the text between its markers."""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace the text between the section's markers (or append the section); the rest is untouched."""
    begin, end = markers(name)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section.rstrip("\n") + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line, its module docstring as the help text."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def publish(section: str, write: Path | None, name: str) -> int:
    """Print the section and, with ``--write FILE``, replace its part of that file; main's exit status."""
    print(section)
    if write:
        write_section(write, name, section)
    return 0


def reproduce(target: str, script: str, options: str) -> str:
    """The sentence that says how a section was written: its make target, or the script's command line."""
    return (
        f"Reproduce: `make {target}` (or `flock /tmp/kmirror-bench.lock .venv/bin/python bench/{script} "
        f"{options} --write docs/benchmarks.md`)."
    )


def closing(lines: list[str], end: str, target: str, script: str, options: str) -> str:
    """A section's text: its lines, then how to reproduce it (see reproduce), then its end marker."""
    return "\n".join([*lines, "", reproduce(target, script, options), end]) + "\n"


def kafka_version(line: str | None = None) -> str:
    """The Apache Kafka release the test clusters of ``line`` run (from the pinned kafka-clients jar)."""
    from kmirror.testing import jars

    lib = jars.fetch(line or jars.MAIN_LINE)
    found = sorted(p.name for p in lib.glob("kafka-clients-*.jar"))
    return found[0].removeprefix("kafka-clients-").removesuffix(".jar") if found else line or jars.MAIN_LINE


def machine_note() -> str:
    """The conditions of a measurement, the same words in every section the benchmarks write."""
    from importlib.metadata import version

    import confluent_kafka

    return (
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, confluent-kafka {version('confluent-kafka')} (librdkafka "
        f"{confluent_kafka.libversion()[0]}), Apache Kafka {kafka_version()} (one KRaft node per cluster, "
        "`kmirror.testing.kafka.BENCH_JVM`) on the same machine. The machine was shared with other test runs "
        f"during this measurement (load average {os.getloadavg()[0]:.1f} as the section was written): "
        "absolute figures are noisy; the interleaved contenders' ratios are the comparison."
    )
