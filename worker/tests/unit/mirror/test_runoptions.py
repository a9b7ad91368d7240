"""kmirror.mirror.runoptions: each `run` option once, and the plan's options built from it: every field of
MirrorOptions has its option, with the same default, and a value given on the command line reaches it."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from kmirror.mirror.plan import MirrorOptions
from kmirror.mirror.runoptions import PLAN_FIELDS, RUN_OPTIONS, mirror_options
from kmirror.options import build_parser

REQUIRED = ["run", "--consumer.config", "c.properties", "--producer.config", "p.properties"]
# A value other than the default for each option that goes to the plan: (argv, the field's value).
GIVEN = {
    "consumer_configs": (["--consumer.config", "c2.properties"], ["c.properties", "c2.properties"]),
    "producer_config": (["--producer.config=q.properties"], "q.properties"),
    "include": (["--include", "a.*,b"], "a.*,b"),
    "exclude": (["--blacklist", "x"], "x"),
    "allow_unsafe": (["--allow.unsafe"], True),
    "num_streams": (["--num.streams", "3"], 3),
    "num_producers": (["--num.producers=4"], 4),
    "queue_size": (["--queue.size", "500"], 500),
    "offset_commit_interval_ms": (["--offset.commit.interval.ms", "5000"], 5000),
    "abort_on_send_failure": (["--abort.on.send.fail=false"], False),
    "topic_refresh_interval_ms": (["--topic.refresh.interval.ms", "2000"], 2000),
    "stats_interval_ms": (["--stats.interval.ms", "1000"], 1000),
    "replication_factor": (["--replication.factor", "3"], 3),
    "config_properties_protect": (["--config.properties.protect", r"retention\..*"], r"retention\..*"),
    "static_membership": (["--static.membership", "false"], False),
    "gap_policy": (["--gap.policy", "stop"], "stop"),
    "provenance_header": (["--provenance.header.enable"], True),
    "provenance_peers": (["--provenance.peers", "target,ID-1"], ("target", "ID-1")),
    "topic_rename_format": (["--topic.rename.format", "${source}.${topic}"], "${source}.${topic}"),
    "target_name": (["--target.name", "west"], "west"),
    "heartbeats_interval_ms": (["--heartbeats.interval.ms", "5000"], 5000),
    "groups": (["--groups", "pay.*"], "pay.*"),
    "sync_group_offsets_interval_ms": (["--sync.group.offsets.interval.ms", "30000"], 30000),
    "initial_offsets": (["--initial.offsets", "target-end"], "target-end"),
    "source_names": (["--source.name", "east"], ["east"]),
}


def test_every_plan_field_has_one_option():
    assert {o.dest for o in RUN_OPTIONS if o.plan} == PLAN_FIELDS == set(GIVEN)
    flags = [f for o in RUN_OPTIONS for f in o.flags]
    assert len(flags) == len(set(flags))


def test_defaults_are_the_plans():
    parsed = mirror_options(build_parser().parse_args(REQUIRED))
    for f in fields(MirrorOptions):
        if f.name in PLAN_FIELDS and f.default is not MISSING:
            assert getattr(parsed, f.name) == f.default, f.name
    assert parsed == MirrorOptions(consumer_configs=["c.properties"], producer_config="p.properties")


@pytest.mark.parametrize("field", sorted(GIVEN))
def test_a_given_value_reaches_the_plan(field):
    argv, expected = GIVEN[field]
    assert getattr(mirror_options(build_parser().parse_args([*REQUIRED, *argv])), field) == expected


def test_the_java_spelling_of_abort_and_the_options_not_in_the_plan():
    a = build_parser().parse_args(
        [*REQUIRED, "--abort.on.send.failure", "false", "--abortOnSendFail", "--metrics.port", "9571"]
    )
    assert mirror_options(a).abort_on_send_failure is True
    not_planned = (a.metrics_port, a.metrics_address, a.log_level, a.log_format)
    assert not_planned == (9571, "127.0.0.1", "INFO", "text")
