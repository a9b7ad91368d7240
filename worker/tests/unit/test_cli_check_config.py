"""`kmirror check-config` reports every problem of every file in one run, each with the right fix.

The reference documents' MirrorMaker sample pair (ZooKeeper-era consumer and producer files) used to take
four runs: one problem per run. Now one run names all three, and `--json` gives them as data. `kmirror
run` still stops at its first file's problems, in one line that says how many more there are.
"""

from __future__ import annotations

import json

import pytest
from reference_samples import ZK_CONSUMER as REFERENCE_CONSUMER
from reference_samples import ZK_PRODUCER as REFERENCE_PRODUCER

from kmirror.cli import main
from kmirror.config import load_client_config
from kmirror.errors import ConfigProblems

pytestmark = pytest.mark.usefixtures("cli_checks_only")  # worker/tests/unit/conftest.py


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def reference(tmp_path):
    consumer, producer = tmp_path / "consumer.properties", tmp_path / "producer.properties"
    consumer.write_text(REFERENCE_CONSUMER)
    producer.write_text(REFERENCE_PRODUCER)
    return str(consumer), str(producer)


def test_reference_sample_pair_every_problem_in_one_run(capsys, reference):
    consumer, producer = reference
    code, out, err = cli(capsys, "check-config", "--consumer.config", consumer, "--producer.config", producer)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert [line.split(": ")[2:4] for line in lines] == [
        [producer, "zk.connect"],
        [consumer, "zk.connect"],
        [consumer, "zk.connectiontimeout.ms"],
    ], err
    assert all(line.startswith("kmirror check-config: error: ") for line in lines)
    # zk.connect: point at the brokers; a ZooKeeper timeout: just delete the line (bootstrap.servers is
    # not what is wrong with it).
    assert "set bootstrap.servers=HOST:PORT" in lines[0] and "set bootstrap.servers=HOST:PORT" in lines[1]
    assert lines[2].endswith("ZooKeeper is not used by kmirror; delete the line"), lines[2]
    # No second line for the missing brokers: the zk.connect refusal already says what to set.
    assert "no brokers" not in err


def test_reference_sample_pair_as_json(capsys, reference):
    consumer, producer = reference
    code, out, err = cli(
        capsys, "check-config", "--json", "--consumer.config", consumer, "--producer.config", producer
    )
    assert (code, err) == (2, "")
    report = json.loads(out)
    assert report["verdict"] == "INVALID"
    assert [(p["file"], p["key"]) for p in report["problems"]] == [
        (producer, "zk.connect"),
        (consumer, "zk.connect"),
        (consumer, "zk.connectiontimeout.ms"),
    ]
    for p in report["problems"]:
        assert p["problem"] == "not supported" and p["fix"].startswith("ZooKeeper is not used")
        assert p["message"] == f"{p['file']}: {p['key']}: {p['problem']}; {p['fix']}"


def test_several_problems_of_one_file_together(tmp_path, capsys):
    """Problems of every stage of one file: translation (a refused key), safety (an engine-owned key,
    an unsafe value when not allowed), librdkafka's check (unknown keys) and the broker list."""
    f = tmp_path / "c.properties"
    f.write_text(
        "bootstrap.servers=kafka1:9092,kafka2\n"
        "group.id=g\n"
        "zookeeper.session.timeout.ms=6000\n"
        "enable.partition.eof=true\n"
        "enable.auto.commit=true\n"
        "fetch.wait.maxx.ms=5\n"
    )
    with pytest.raises(ConfigProblems) as info:
        load_client_config(f, "consumer")
    keys = [p.key for p in info.value.problems]
    assert keys == [
        "zookeeper.session.timeout.ms",
        "bootstrap.servers",
        "enable.partition.eof",
        None,  # the unsafe value: its line names key and value itself
        None,  # unknown keys: named in the problem, as many as there are
    ], [p.render() for p in info.value.problems]
    rendered = [p.render() for p in info.value.problems]
    assert "enable.auto.commit=true is unsafe" in rendered[3]
    assert "fetch.wait.maxx.ms" in rendered[4]
    # As one line (`kmirror run`): the first, and how many more.
    assert str(info.value).endswith("(and 4 more problems: kmirror check-config lists them all)")
    assert "\n" not in str(info.value)


def test_check_config_lists_problems_of_every_file(tmp_path, capsys):
    a, b = tmp_path / "a.properties", tmp_path / "b.properties"
    a.write_text("bootstrap.servers=k:9092\n")  # no group.id
    b.write_text("bootstrap.servers=k:9092\ngroup.id=g\nmirror.topics.whitelist=(\n")  # bad filter
    code, out, err = cli(capsys, "check-config", "--consumer.config", str(a), "--consumer.config", str(b))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert f"{a}: group.id: no consumer group" in lines[0]
    assert f"{b}: mirror.topics.whitelist:" in lines[1]


def test_run_stops_at_the_first_files_problems_in_one_line(tmp_path, capsys):
    c, p = tmp_path / "c.properties", tmp_path / "p.properties"
    c.write_text("bootstrap.servers=k:9092\ngroup.id=g\n")
    p.write_text("bootstrap.servers=k:9092\nacks=1\npartitioner=random\n")
    code, out, err = cli(
        capsys, "run", "--consumer.config", str(c), "--producer.config", str(p), "--whitelist", "x"
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"kmirror run: error: {p}: partitioner: kmirror sets partitioner=murmur2_random")
    assert err.rstrip().endswith("(and 1 more problem: kmirror check-config lists them all)"), err
