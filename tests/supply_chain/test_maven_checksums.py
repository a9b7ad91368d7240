"""Maven fetches Apache Kafka's jars (kmirror.testing.jars, make kafka-install) and Spark's connector
(bench/spark_kafka.py) with the strict checksum policy: a file whose checksum does not match the
repository's fails the fetch, where Maven's default policy only warns (and -q hides the warning), and the
error names the mismatch. Real mvn against a file:// repository this test writes, serving one artifact with a
wrong .sha1; nothing is mocked. The artifact gets a version of its own per run, removed from ~/.m2 after."""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing import jars

GROUP = "org.kmirror.tests"
ARTIFACT = "checksummed"
LOCAL_REPO_GROUP = Path.home() / ".m2" / "repository" / Path(*GROUP.split("."))


def publish(repo: Path, version: str) -> None:
    """ARTIFACT VERSION in the Maven repository REPO: the pom with its .sha1, the jar with a wrong .sha1."""
    d = repo / Path(*GROUP.split(".")) / ARTIFACT / version
    d.mkdir(parents=True)
    pom = (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>{GROUP}</groupId><artifactId>{ARTIFACT}</artifactId><version>{version}</version></project>"
    ).encode()
    jar = b"PK\x05\x06" + bytes(18)  # an empty zip file
    for ext, data, listed in (("pom", pom, pom), ("jar", jar, b"another jar")):
        path = d / f"{ARTIFACT}-{version}.{ext}"
        path.write_bytes(data)
        path.with_name(path.name + ".sha1").write_text(hashlib.sha1(listed).hexdigest())


def descriptor(tmp: Path, repo: Path, version: str) -> Path:
    """A Maven descriptor depending on ARTIFACT VERSION, with REPO as a repository."""
    path = tmp / "pom.xml"
    path.write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>org.kmirror.tests</groupId><artifactId>consumer</artifactId><version>1</version>"
        "<packaging>pom</packaging>"
        f"<repositories><repository><id>kmirror-tests</id><url>{repo.as_uri()}</url></repository>"
        "</repositories><dependencies><dependency>"
        f"<groupId>{GROUP}</groupId><artifactId>{ARTIFACT}</artifactId><version>{version}</version>"
        "</dependency></dependencies></project>"
    )
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    assert shutil.which("mvn"), "Maven is missing: make kafka-install"
    yield tmp_path / "repo"
    shutil.rmtree(LOCAL_REPO_GROUP, ignore_errors=True)


def test_a_jar_whose_checksum_does_not_match_fails_the_fetch(repo: Path, tmp_path: Path) -> None:
    version = f"1.0-{uuid.uuid4().hex[:12]}"
    publish(repo, version)
    target = tmp_path / "jars"
    with pytest.raises(jars.JarsError) as failed:
        jars.copy_dependencies(descriptor(tmp_path, repo, version), target, "the test's jar")
    message = str(failed.value)
    assert message.startswith("mvn could not fetch the test's jar: "), message
    assert f"{GROUP}:{ARTIFACT}:jar:{version}" in message and "Checksum validation failed" in message, message
    assert not target.exists()
    assert not (LOCAL_REPO_GROUP / ARTIFACT / version / f"{ARTIFACT}-{version}.jar").exists()
