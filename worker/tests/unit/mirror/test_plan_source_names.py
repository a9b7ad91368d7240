"""--source.name: the name of each source cluster in metrics, /health and logs (the Ansible role passes the
inventory's name; without it every deployed instance was "consumer", its file's name). The static members'
group.instance.id keeps the file-derived name, so naming a source moves no partition."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmirror.errors import ConfigError
from kmirror.mirror.plan import MirrorOptions, build_plan
from kmirror.options import build_parser

CONSUMER = "bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\n"
PRODUCER = "bootstrap.servers=127.0.0.1:1\nacks=all\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, text in (("east", CONSUMER), ("west", CONSUMER), ("target", PRODUCER)):
        (tmp_path / name).mkdir()
        path = tmp_path / name / ("producer.properties" if name == "target" else "consumer.properties")
        path.write_text(text)
        out[name] = str(path)
    return out


def options(files: dict[str, str], *names: str) -> MirrorOptions:
    argv = ["run", "--whitelist", ".*", "--num.streams", "2", "--producer.config", files["target"]]
    argv += ["--consumer.config", files["east"]]
    for n in names:
        argv += ["--source.name", n]
    a = build_parser().parse_args(argv)
    return MirrorOptions(
        consumer_configs=a.consumer_configs,
        producer_config=a.producer_config,
        include=a.include,
        num_streams=a.num_streams,
        source_names=a.source_names,
    )


def test_without_it_the_source_is_the_consumer_files_name(files):
    plan = build_plan(options(files))
    assert [s.source for s in plan.stream_specs()] == ["consumer", "consumer"]


def test_the_given_name_labels_every_stream_and_keeps_the_instance_id(files):
    named, unnamed = build_plan(options(files, "east")), build_plan(options(files))
    specs = named.stream_specs()
    assert [(s.source, s.label) for s in specs] == [("east", "east#0"), ("east", "east#1")]
    # the group.instance.id is the one the instance had before it was named
    assert [s.consumer["group.instance.id"] for s in specs] == [
        s.consumer["group.instance.id"] for s in unnamed.stream_specs()
    ]
    assert "-consumer-" in specs[0].consumer["group.instance.id"]


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (("east", "west"), "given 2 times for 1 --consumer.config"),
        (("east!",), "is not a source name"),
        (("ea st",), "is not a source name"),
    ],
)
def test_wrong_names_are_one_line_naming_the_option(files, names, problem):
    with pytest.raises(ConfigError) as err:
        build_plan(options(files, *names))
    assert "--source.name" in str(err.value) and problem in str(err.value) and "\n" not in str(err.value)


def test_two_sources_cannot_share_a_name(files):
    o = options(files, "east")
    o.consumer_configs.append(files["west"])
    o.source_names.append("east")
    with pytest.raises(ConfigError, match="given twice"):
        build_plan(o)
