#!/usr/bin/python
"""Ansible module kmirror_group_lag: a mirror's consumer group on its source cluster and how far behind it is.

Read-only.
"""

# ruff: noqa: E402 (Ansible plugin layout: the DOCUMENTATION strings come before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
module: kmirror_group_lag
short_description: Report a kmirror instance's consumer group state, committed offsets and lag
description:
  - Reads the instance's deployed consumer properties (C(kmirror.config), so the same TLS/SASL settings),
    then asks the source cluster for the group's state and members, its committed offsets, and the end
    offsets of every topic the whitelist/blacklist select.
  - Lag of a partition is its end offset minus the group's committed offset (or minus its start offset
    when the
    group never committed there). kmirror commits only what the target acknowledged, so this is the lag of the
    mirror as a whole.
  - Read-only; never changes anything.
options:
  consumer_config:
    description: The instance's consumer properties file.
    type: path
    required: true
  whitelist:
    description: The instance's whitelist (Java regex).
    type: str
  blacklist:
    description: The instance's blacklist (Java regex).
    type: str
  timeout:
    description: Seconds per request.
    type: float
    default: 10
requirements: [kmirror (the worker package), confluent-kafka]
"""

RETURN = r"""
group: {description: The consumer group, type: str, returned: always}
state: {description: The group's state (STABLE, EMPTY, ...), type: str, returned: always}
members: {description: Members the broker reports, type: int, returned: always}
consuming:
  description: The group is stable (its members have their assignments).
  type: bool
  returned: always
committed_partitions: {description: Partitions with a committed offset, type: int, returned: always}
partitions:
  description: Per partition (kmirror.health.lag) - topic, partition, offset (committed), log_size, lag,
    owner.
  type: list
  returned: always
total_lag: {description: Sum of the partitions' lag (records), type: int, returned: always}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kmirror.config import admin_settings, client_conf, load_client_config
    from kmirror.config.filters import TopicFilter
    from kmirror.coordinator import GroupAdmin
    from kmirror.errors import KmirrorError
    from kmirror.health import lag

    IMPORT_ERROR = None
except ImportError:
    IMPORT_ERROR = traceback.format_exc()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "consumer_config": {"type": "path", "required": True},
            "whitelist": {"type": "str"},
            "blacklist": {"type": "str"},
            "timeout": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )
    if IMPORT_ERROR:
        module.fail_json(
            msg="kmirror is not importable: run with kmirror's virtualenv as the interpreter",
            exception=IMPORT_ERROR,
        )
    p = module.params
    timeout = p["timeout"]
    try:
        cfg = load_client_config(p["consumer_config"], "consumer", allow_unsafe=True)
        group = cfg.settings["group.id"]
        conf = client_conf(admin_settings(cfg.settings))
        admin = AdminClient(conf)
        topic_filter = TopicFilter(p["whitelist"] or None, p["blacklist"] or None)
        topics = topic_filter.select(
            t for t, m in admin.list_topics(timeout=timeout).topics.items() if m.error is None
        )
        # Asked by kmirror's helper process: librdkafka can abort the process that asks a group's
        # coordinator (librdkafka issue 4605); then this is one failed task, not a module crash.
        with GroupAdmin(conf, "the source cluster") as groups:
            desc = groups.describe_group(group, timeout)
        # The numbers are kmirror's own (kmirror.health.lag, as `kmirror lag` prints them).
        rows = lag.group_lag(conf, group, topics, timeout=timeout)
    except KmirrorError as exc:
        module.fail_json(msg=str(exc))
    except KafkaException as exc:
        module.fail_json(
            msg=f"request to the source cluster failed: {exc.args[0].str() if exc.args else exc}"
        )
    if desc is None:  # the coordinator does not know the group
        state, members = "DEAD", 0
    else:
        state = desc.state.name if hasattr(desc.state, "name") else str(desc.state)
        members = len(desc.members or [])
    module.exit_json(
        changed=False,
        group=group,
        state=state,
        members=members,
        consuming=state == "STABLE",
        committed_partitions=sum(1 for r in rows if r.offset >= 0),
        partitions=[r.as_dict() for r in rows],
        total_lag=lag.total(rows),
    )


if __name__ == "__main__":
    main()
