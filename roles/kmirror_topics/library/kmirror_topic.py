#!/usr/bin/python
"""Ansible module kmirror_topic: create a source's mirrored topics on the target before the mirror starts."""

# ruff: noqa: E402 (Ansible plugin layout: the DOCUMENTATION strings come before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
module: kmirror_topic
short_description: Create destination topics on the target with the source's partition count and configs
description:
  - Lists the source cluster's topics that the mirror's whitelist/blacklist select (kmirror's own Java-regex
    filter, internal topics never), and creates those missing on the target with the source's partition count
    and explicitly set topic configs, through C(kmirror.topics) (the code the worker itself uses).
  - Connects with the instance's deployed consumer and producer properties files, so it uses exactly the
    mirror's addresses, TLS and SASL settings (C(kmirror.config)).
  - Idempotent (existing topics are left alone; a partition count that differs is reported as a warning),
    supports check mode and diff mode.
  - Runs on a worker host with kmirror's virtualenv as the interpreter.
options:
  consumer_config:
    description: The instance's consumer properties (the source cluster).
    type: path
    required: true
  producer_config:
    description: The instance's producer properties (the target cluster).
    type: path
    required: true
  whitelist:
    description: Java regex of the topics to mirror (MirrorMaker's --whitelist; a comma means |).
    type: str
  blacklist:
    description: Java regex of the topics not to mirror.
    type: str
  topics:
    description: Only consider these source topics (default all the filters select).
    type: list
    elements: str
  replication_factor:
    description: Replication factor of created topics; -1 means the target's default.
    type: int
    default: -1
  timeout:
    description: Seconds to wait for each admin request.
    type: float
    default: 30
requirements: [kmirror (the worker package), confluent-kafka]
"""

EXAMPLES = r"""
- name: Create east's topics on the target
  kmirror_topic:
    consumer_config: /etc/kmirror/east/consumer.properties
    producer_config: /etc/kmirror/east/producer.properties
    whitelist: "orders.*,payments"
  vars:
    ansible_python_interpreter: /opt/kmirror/venv/bin/python
"""

RETURN = r"""
created:
  description: Topics created (or, in check mode, that would be), with partitions and configs.
  type: list
  elements: dict
  returned: always
present:
  description: Selected topics already on the target, with their partition count there.
  type: dict
  returned: always
mismatched:
  description: Selected topics whose partition count differs between source and target.
  type: dict
  returned: always
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kmirror import topics as kt
    from kmirror.config import admin_settings, client_conf, load_client_config
    from kmirror.errors import KmirrorError
    from kmirror.filters import TopicFilter

    IMPORT_ERROR = None
except ImportError:
    IMPORT_ERROR = traceback.format_exc()


def admin_for(path: str, role: str) -> AdminClient:
    cfg = load_client_config(path, role, allow_unsafe=True)
    return AdminClient(client_conf(admin_settings(cfg.settings)))


def listing(counts: dict, configs: dict | None = None) -> str:
    lines = []
    for name in sorted(counts):
        extra = ""
        if configs and configs.get(name):
            extra = " " + ",".join(f"{k}={v}" for k, v in sorted(configs[name].items()))
        lines.append(f"{name} partitions={counts[name]}{extra}\n")
    return "".join(lines)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "consumer_config": {"type": "path", "required": True},
            "producer_config": {"type": "path", "required": True},
            "whitelist": {"type": "str"},
            "blacklist": {"type": "str"},
            "topics": {"type": "list", "elements": "str"},
            "replication_factor": {"type": "int", "default": -1},
            "timeout": {"type": "float", "default": 30.0},
        },
        supports_check_mode=True,
    )
    if IMPORT_ERROR:
        module.fail_json(
            msg=missing_required_lib("kmirror (run with kmirror's virtualenv as the interpreter)"),
            exception=IMPORT_ERROR,
        )
    p = module.params
    missing_files = [f for f in (p["consumer_config"], p["producer_config"]) if not os.path.isfile(f)]
    if missing_files and module.check_mode:
        module.exit_json(
            changed=False,
            skipped=True,
            created=[],
            present={},
            mismatched={},
            selected=[],
            msg=f"not deployed yet ({', '.join(missing_files)}): the topics are planned on the real run",
        )
    try:
        topic_filter = TopicFilter(p["whitelist"] or None, p["blacklist"] or None)
        source = admin_for(p["consumer_config"], "consumer")
        target = admin_for(p["producer_config"], "producer")
        on_source = kt.partition_counts(source, timeout=p["timeout"])
        wanted = {t: n for t, n in on_source.items() if topic_filter.matches(t)}
        if p["topics"] is not None:
            unknown = sorted(set(p["topics"]) - set(on_source))
            if unknown:
                module.fail_json(msg=f"not on the source cluster: {', '.join(unknown)}")
            wanted = {t: n for t, n in wanted.items() if t in p["topics"]}
        on_target = kt.partition_counts(target, timeout=p["timeout"])
        missing = [t for t in wanted if t not in on_target]
        configs = kt.describe_configs(source, missing, timeout=p["timeout"])
        specs = kt.plan(wanted, on_target, configs)
        if specs and not module.check_mode:
            kt.create(target, specs, replication_factor=p["replication_factor"], timeout=p["timeout"])
    except KmirrorError as exc:
        module.fail_json(msg=str(exc))
    except KafkaException as exc:
        module.fail_json(msg=f"Kafka admin request failed: {exc.args[0].str() if exc.args else exc}")
    present = {t: on_target[t] for t in wanted if t in on_target}
    mismatched = {
        t: {"source": wanted[t], "target": on_target[t]} for t in present if on_target[t] != wanted[t]
    }
    for t, m in sorted(mismatched.items()):
        module.warn(
            f"topic {t} has {m['source']} partitions on the source but {m['target']} on the target: "
            "records keep their partition number only when the counts match"
        )
    created = [{"name": s.name, "partitions": s.partitions, "configs": s.configs} for s in specs]
    after = dict(present, **{s.name: s.partitions for s in specs})
    module.exit_json(
        changed=bool(specs),
        created=created,
        present=present,
        mismatched=mismatched,
        selected=sorted(wanted),
        diff={
            "before": listing(present),
            "after": listing(after, {s.name: s.configs for s in specs}),
            "before_header": "target topics (selected)",
            "after_header": "target topics (selected)",
        },
    )


if __name__ == "__main__":
    main()
