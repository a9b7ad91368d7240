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
    and the configs set on the source topic (not what it inherits from the source brokers: the destination
    inherits the target's defaults there; never read-only, sensitive or cluster-specific ones such as
    min.insync.replicas), through C(kmirror.mirror.topics), the code and the one copy rule the worker itself
    uses.
  - Topics already on the target are brought in step the way the running worker keeps them, by the same code
    (incremental alter configs) where their replicable configs differ from the source's (a replicable config
    set on the destination topic and not on the source topic is deleted), except that the protected configs
    (I(config_properties_protect)) change only where the destination keeps at least as many records (a
    change held back is a warning and in C(held)), and partitions are
    added (create partitions) where the target has fewer than the source. A target that refuses to add
    partitions is reported as a warning and in C(mismatched), not as a failure (the worker then places that
    topic's records by key hash).
  - Connects with the instance's deployed consumer and producer properties files, so it uses exactly the
    mirror's addresses, TLS and SASL settings (C(kmirror.config)).
  - Idempotent, supports check mode and diff mode.
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
  rename_format:
    description: The source's C(topic_rename_format) (C(kmirror run --topic.rename.format)) with
      C(${topic}) and C(${source}); destination topics are created, grown and configured under the names
      it gives. Default the source topic's name.
    type: str
  source_name:
    description: The source's name, C(${source}) in I(rename_format).
    type: str
  target_name:
    description: The target's name; with a I(rename_format) holding C(${source}), source topics that are
      renamed copies from the target are not selected (as C(kmirror run --target.name)).
    type: str
  config_properties_protect:
    description: The source's C(config_properties_protect) (C(kmirror run --config.properties.protect)):
      Java regexes of the topic configs an existing destination topic takes from its source only where it
      then keeps at least as many records, comma-separated, or C(none). Default the worker's (retention,
      cleanup and segment settings, max.message.bytes; docs/security.md).
    type: str
  replication_factor:
    description: Replication factor of created topics; -1 means the target's default. The role passes the
      source's C(replication_factor) from the inventory (the one its instance's C(kmirror run
      --replication.factor) gets), else C(kmirror_topics_replication_factor).
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
  description: Selected topics whose partition count differs between source and target after this run (in
    check mode, if the target accepts the partitions), with the reason when the target refused to add them.
  type: dict
  returned: always
altered:
  description: Existing target topics whose configs were (check mode, would be) changed to follow the source,
    with the configs set.
  type: dict
  returned: always
held:
  description: Existing target topics whose protected configs were not changed to the source's, with the
    source's value (null where the source no longer sets it) and the one the destination keeps.
  type: dict
  returned: always
partitions_added:
  description: Existing target topics given (check mode, that would be given) the source's partition count.
  type: dict
  returned: always
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kmirror.config import admin_settings, client_conf, load_client_config
    from kmirror.config.filters import TopicFilter
    from kmirror.errors import KmirrorError
    from kmirror.lineage.rename import rename
    from kmirror.mirror import topics as kt
    from kmirror.mirror.configguard import DEFAULT_PROTECTED, ConfigGuard
    from kmirror.mirror.heartbeats import is_heartbeat_topic

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


def warn_held(module: AnsibleModule, guard: ConfigGuard, held: dict) -> None:
    """A warning per protected config a destination topic keeps instead of the source's."""
    for t, keys in held.items():
        for key, (wanted, kept) in sorted(keys.items()):
            module.warn(
                f"topic {t} keeps {key}={kept if kept is not None else '(unset)'}, not the source's "
                f"{wanted if wanted is not None else 'removal of it'}: a protected config is "
                f"{guard.rule(key)} (config_properties_protect, docs/security.md); to follow the source, "
                "alter it on the target by hand"
            )


def main() -> None:  # noqa: PLR0915 - an Ansible module's main: its argument spec and one sequence
    module = AnsibleModule(
        argument_spec={
            "consumer_config": {"type": "path", "required": True},
            "producer_config": {"type": "path", "required": True},
            "whitelist": {"type": "str"},
            "blacklist": {"type": "str"},
            "topics": {"type": "list", "elements": "str"},
            "rename_format": {"type": "str"},
            "source_name": {"type": "str"},
            "target_name": {"type": "str"},
            "config_properties_protect": {"type": "str"},
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
            altered={},
            held={},
            partitions_added={},
            selected=[],
            msg=f"not deployed yet ({', '.join(missing_files)}): the topics are planned on the real run",
        )
    try:
        topic_filter = TopicFilter(p["whitelist"] or None, p["blacklist"] or None)
        names = rename(p["rename_format"] or None, p["source_name"] or "", p["target_name"] or None)
        guard = ConfigGuard(p["config_properties_protect"] or DEFAULT_PROTECTED).check()
        source = admin_for(p["consumer_config"], "consumer")
        target = admin_for(p["producer_config"], "producer")
        on_source = kt.partition_counts(source, timeout=p["timeout"])
        # The topics the worker mirrors (kmirror.mirror.placement): its own heartbeat topic it makes itself.
        by_source = {
            t: n
            for t, n in on_source.items()
            if topic_filter.matches(t) and not is_heartbeat_topic(t) and not names.came_from_target(t)
        }
        if p["topics"] is not None:
            unknown = sorted(set(p["topics"]) - set(on_source))
            if unknown:
                module.fail_json(msg=f"not on the source cluster: {', '.join(unknown)}")
            by_source = {t: n for t, n in by_source.items() if t in p["topics"]}
        # From here on every topic is named by its destination name (the source's without a format).
        dest = {t: names(t) for t in by_source}
        wanted = {dest[t]: n for t, n in by_source.items()}
        on_target = kt.partition_counts(target, timeout=p["timeout"])
        missing = [t for t in by_source if dest[t] not in on_target]
        configs = kt.describe_configs(source, missing, timeout=p["timeout"])
        specs = kt.plan(wanted, on_target, {dest[t]: c for t, c in configs.items()})
        present = {t: on_target[t] for t in wanted if t in on_target}
        # Existing destination topics: the same configs and partitions the running worker keeps them at.
        origin = {d: t for t, d in dest.items()}
        described, source_err = kt.current_configs(source, [origin[t] for t in present], p["timeout"])
        source_cfg = {dest[t]: c for t, c in described.items()}
        on_target, target_err = kt.described_configs(target, present, p["timeout"])
        target_cfg = {t: c.set for t, c in on_target.items()}
        if source_err or target_err:
            module.fail_json(
                msg="could not describe topic configs: "
                + "; ".join(f"source {t}: {why}" for t, why in sorted(source_err.items()))
                + "; ".join(f"target {t}: {why}" for t, why in sorted(target_err.items()))
                + ": grant the mirror principal DESCRIBE_CONFIGS on the topics of both clusters",
            )
        changes = {
            t: kt.config_changes(c, target_cfg[t], guard, on_target[t].effective)
            for t, c in source_cfg.items()
            if t in target_cfg
        }
        held = {t: c.held for t, c in sorted(changes.items()) if c.held}
        changes = {t: c for t, c in changes.items() if c}
        grow = kt.partitions_to_add(wanted, present)
        refused_configs: dict = {}
        refused_partitions: dict = {}
        if not module.check_mode:
            if specs:
                kt.create(target, specs, replication_factor=p["replication_factor"], timeout=p["timeout"])
            refused_configs = kt.alter_configs(target, changes, p["timeout"])
            refused_partitions = kt.add_partitions(target, grow, p["timeout"])
    except KmirrorError as exc:
        module.fail_json(msg=str(exc))
    except KafkaException as exc:
        module.fail_json(msg=f"Kafka admin request failed: {exc.args[0].str() if exc.args else exc}")
    if refused_configs:
        module.fail_json(
            msg="could not alter destination topic configs: "
            + "; ".join(f"{t}: {why}" for t, why in sorted(refused_configs.items()))
            + ": grant the mirror principal ALTER_CONFIGS and DESCRIBE_CONFIGS on the target topics",
        )
    added = {t: n for t, n in grow.items() if t not in refused_partitions}
    after_counts = dict(present, **added, **{s.name: s.partitions for s in specs})
    mismatched = {}
    for t in present:
        if after_counts[t] != wanted[t]:
            mismatched[t] = {"source": wanted[t], "target": after_counts[t]}
            if t in refused_partitions:
                mismatched[t]["reason"] = refused_partitions[t]
    for t, m in sorted(mismatched.items()):
        why = f" (adding partitions failed: {m['reason']})" if "reason" in m else ""
        effect = (
            "the mirror places its records by key hash, not by partition number"
            if m["target"] < m["source"]
            else "records keep their partition number, the extra target partitions stay empty"
        )
        module.warn(
            f"topic {t} has {m['source']} partitions on the source but {m['target']} on the target{why}: "
            + effect
        )
    warn_held(module, guard, held)
    created = [{"name": s.name, "partitions": s.partitions, "configs": s.configs} for s in specs]
    altered = {t: {"set": c.set, "delete": list(c.delete)} for t, c in sorted(changes.items())}
    before_cfg = {
        t: {k: target_cfg[t].get(k, "(unset)") for k in (*c.set, *c.delete)} for t, c in changes.items()
    }
    after_cfg = dict({t: c.set for t, c in changes.items()}, **{s.name: s.configs for s in specs})
    module.exit_json(
        changed=bool(specs or changes or added),
        created=created,
        present=present,
        mismatched=mismatched,
        altered=altered,
        held={t: {k: {"source": w, "kept": v} for k, (w, v) in keys.items()} for t, keys in held.items()},
        partitions_added=added,
        selected=sorted(wanted),
        diff={
            "before": listing(present, before_cfg),
            "after": listing(after_counts, after_cfg),
            "before_header": "target topics (selected)",
            "after_header": "target topics (selected)",
        },
    )


if __name__ == "__main__":
    main()
