"""Apache Kafka's own jars, pinned and cached: the class path of one Kafka line (4.3 or 3.9).

The versions are in ``poms/kafka-<line>.xml`` beside this module (one Maven descriptor per line; the
lines are never mixed on one class path). The first call for a line runs
``mvn --strict-checksums dependency:copy-dependencies`` (a jar, pom or plugin whose checksum does not match
the repository's fails the fetch, where Maven's default only warns; ~/.m2 keeps them) into
``$KMIRROR_KAFKA_CACHE`` (default ``~/.cache/kmirror/kafka``), in a directory named after the line and a
hash of its descriptor; later calls find it there and fetch nothing.

Command line (the install step, ``make kafka-install``)::

    python -m kmirror.testing.jars fetch [LINE ...]
    python -m kmirror.testing.jars classpath LINE
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kmirror.errors import KmirrorError

LINES = ("4.3", "3.9")
MAIN_LINE = "4.3"
_POMS = Path(__file__).with_name("poms")


class JarsError(KmirrorError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("KMIRROR_KAFKA_CACHE", Path.home() / ".cache" / "kmirror" / "kafka"))


def pom(line: str) -> Path:
    if line not in LINES:
        raise JarsError(f"no Kafka line {line!r}; known: {', '.join(LINES)}")
    return _POMS / f"kafka-{line}.xml"


def lib_dir(line: str) -> Path:
    digest = hashlib.sha256(pom(line).read_bytes()).hexdigest()[:12]
    return cache_root() / f"{line}-{digest}"


def fetch(line: str) -> Path:
    """The directory holding every jar of ``line``, fetched once (concurrent callers wait for the first)."""
    return copy_dependencies(pom(line), lib_dir(line), f"Apache Kafka {line}")


def copy_dependencies(descriptor: Path, target: Path, what: str) -> Path:
    """``target``, holding every jar ``descriptor`` (a Maven pom) depends on, fetched once with
    ``mvn dependency:copy-dependencies``; concurrent callers wait for the first. ``what`` names the jars
    in the error."""
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise JarsError("Maven (mvn) is not installed; apt-get install maven")
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        proc = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                # A checksum mismatch fails the fetch (Maven's default policy only warns, and -q hides it).
                "--strict-checksums",
                "-f",
                str(descriptor),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise JarsError(f"mvn could not fetch {what}: {mvn_failure(proc.stdout + proc.stderr)}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        (target / ".complete").touch()
    return target


def mvn_failure(output: str) -> str:
    """Maven's first [ERROR] line (what failed and why, e.g. a checksum mismatch), else its last lines."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in output.splitlines()]
    errors = [line.removeprefix("[ERROR]").strip() for line in lines if line.startswith("[ERROR]")]
    first = next((e for e in errors if e), None)
    return first if first else " | ".join(line for line in lines if line)[-500:]


def classpath(line: str = MAIN_LINE) -> str:
    """A ``java -cp`` value with every jar of ``line``."""
    return str(fetch(line) / "*")


def java() -> str:
    """The Java runtime the brokers and tools run on (JAVA_HOME's, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JarsError("no Java runtime: apt-get install openjdk-17-jre-headless")
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kmirror.testing.jars",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch the jars of these lines (default: all)")
    f.add_argument("lines", nargs="*", default=list(LINES))
    c = sub.add_parser("classpath", help="print the java -cp value of a line")
    c.add_argument("line", choices=LINES)
    a = p.parse_args(argv)
    try:
        if a.cmd == "fetch":
            for line in a.lines:
                print(f"Apache Kafka {line}: {fetch(line)}")
        else:
            print(classpath(a.line))
    except KmirrorError as exc:
        print(f"kmirror.testing.jars: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
