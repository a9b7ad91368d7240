#!/usr/bin/python
"""Ansible module kmirror_acl: grant (or revoke) the ACLs a kmirror instance needs on one cluster."""

# ruff: noqa: E402 (Ansible plugin layout: the DOCUMENTATION strings come before the imports)
from __future__ import annotations

DOCUMENTATION = r"""
module: kmirror_acl
short_description: Grant the mirror principal the ACLs MirrorMaker's documentation lists, on one cluster
description:
  - Computes the bindings (C(module_utils/kmirror_acl_bindings.py)); on the source cluster READ, DESCRIBE and
    DESCRIBE_CONFIGS on the whitelisted topics (LITERAL or PREFIXED) and READ on the mirror's group;
    on the target WRITE, DESCRIBE, CREATE, DESCRIBE_CONFIGS, ALTER_CONFIGS and ALTER on those topics (kmirror
    creates destination topics, keeps their configs equal to the source's and adds partitions a source topic
    gains).
  - With I(admin_config), reads the principal's existing bindings (C(describe_acls)) and creates the
    missing ones (C(create_acls)) or, with I(state=absent), deletes them. Idempotent; check mode and
    diff mode report the plan
    without changing anything.
  - Without I(admin_config) it only returns the bindings (nothing to connect with).
  - Runs where confluent-kafka and kmirror are importable (a worker host, with kmirror's virtualenv as
    interpreter): the whitelist is read with the worker's own grammar (C(kmirror.config.filters)).
options:
  side:
    description: C(source) (the mirror reads it) or C(target) (the mirror writes it).
    type: str
    required: true
    choices: [source, target]
  principal:
    description: The mirror's principal on that cluster, e.g. C(User:mirror-east). Not the brokers' own.
    type: str
    required: true
  whitelist:
    description: The mirror's Java-regex whitelist; its alternatives become LITERAL or PREFIXED topic
      patterns. Without one (and without I(patterns)) every topic is granted (LITERAL C(*)); an empty or blank
      one is refused with the worker's message, as the worker refuses it.
    type: str
  patterns:
    description: Explicit topic patterns instead of deriving them from I(whitelist).
    type: list
    elements: dict
  group:
    description: The mirror's consumer group (source side).
    type: str
  sync_groups:
    description:
      - Java regex of the consumer groups whose offsets kmirror syncs for failover (the source's C(groups),
        C(kmirror run --groups)); adds the group, target-topic READ and sync-topic bindings it needs.
    type: str
  source_name:
    description: The source's name (the inventory's), for I(rename_format) and I(heartbeats).
    type: str
  rename_format:
    description: The source's C(topic_rename_format); on the target the destination topics' renamed names are
      granted.
    type: str
  heartbeats:
    description: The source has C(heartbeats_interval_ms); grants its heartbeat topic
      C(kmirror.heartbeats.NAME) on the source (also WRITE and CREATE) and its copy on the target.
    type: bool
    default: false
  host:
    description: The host the principal may connect from.
    type: str
    default: "*"
  idempotent_write:
    description: Also grant IDEMPOTENT_WRITE on the target cluster (brokers older than Kafka 2.8).
    type: bool
    default: false
  admin_config:
    description: librdkafka settings of an administrator's AdminClient on that cluster (bootstrap.servers,
      security.protocol, sasl.*, ssl.*). Secret.
    type: dict
  state:
    description: C(present) grants, C(absent) revokes exactly these bindings.
    type: str
    default: present
    choices: [present, absent]
  timeout:
    description: Seconds per admin request.
    type: float
    default: 30
  files_may_be_missing:
    description: In check mode, a file named by an admin_config C(*.location) key that does not exist yet
      (deployed later in the same play, e.g. the CA by kmirror_config) skips the cluster and reports every
      binding as to be created. Otherwise such a file fails the task.
    type: bool
    default: false
"""

RETURN = r"""
bindings:
  description: Every binding the principal needs (as dicts), whether present or not.
  type: list
  returned: always
to_create:
  description: Bindings created (or to be created in check mode).
  type: list
  returned: always
to_delete:
  description: Bindings deleted (state absent).
  type: list
  returned: always
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kmirror_acl_bindings import AclPatternError, Binding, bindings

try:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    IMPORT_ERROR = None
except ImportError:
    IMPORT_ERROR = traceback.format_exc()


def kafka_fields(b: Binding) -> tuple[object, ...]:
    """The arguments of an AclBinding (or of the AclBindingFilter matching only it) for b."""
    return (
        ResourceType[b.resource_type],
        b.name,
        ResourcePatternType[b.pattern_type],
        b.principal,
        b.host,
        AclOperation[b.operation],
        AclPermissionType[b.permission],
    )


def to_kafka(b: Binding) -> AclBinding:
    return AclBinding(*kafka_fields(b))


def from_kafka(a: AclBinding) -> Binding:
    return Binding(
        a.restype.name,
        a.name,
        a.resource_pattern_type.name,
        a.principal,
        a.host,
        a.operation.name,
        a.permission_type.name,
    )


def existing(admin: AdminClient, principal: str, timeout: float) -> set[Binding]:
    flt = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        principal,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return {from_kafka(a) for a in admin.describe_acls(flt, request_timeout=timeout).result()}


def request_failed(exc: KafkaException) -> str:
    """One line for a refused ACL request. A broker refusing CreateAcls/DeleteAcls to a principal without
    ALTER on the cluster sends a dump of the forwarded Java request as its message (Kafka 4.3): the error's
    own description is used then, with the fix."""
    err = exc.args[0] if exc.args else None
    if err is None or not hasattr(err, "code"):
        return f"ACL request failed: {exc}"
    if err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return (
            f"ACL request failed: {KafkaError(err.code()).str()}: the principal of admin_config may not "
            "change ACLs; give admin_config the credentials of a super user or of a principal with ALTER "
            "(and DESCRIBE) on the cluster"
        )
    return f"ACL request failed: {err.str()}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "side": {"type": "str", "required": True, "choices": ["source", "target"]},
            "principal": {"type": "str", "required": True},
            "whitelist": {"type": "str"},
            "patterns": {"type": "list", "elements": "dict"},
            "group": {"type": "str"},
            "host": {"type": "str", "default": "*"},
            "idempotent_write": {"type": "bool", "default": False},
            "sync_groups": {"type": "str"},
            "source_name": {"type": "str"},
            "rename_format": {"type": "str"},
            "heartbeats": {"type": "bool", "default": False},
            "admin_config": {"type": "dict", "no_log": True},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
            "timeout": {"type": "float", "default": 30.0},
            "files_may_be_missing": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        wanted = bindings(
            p["side"],
            p["principal"],
            whitelist=p["whitelist"],
            group=p["group"],
            patterns=p["patterns"],
            host=p["host"],
            idempotent_write=p["idempotent_write"],
            sync_groups=p["sync_groups"],
            source_name=p["source_name"],
            rename_format=p["rename_format"],
            heartbeats=p["heartbeats"],
        )
    except AclPatternError as exc:
        module.fail_json(msg=str(exc))
    result = {"bindings": [b.as_dict() for b in wanted], "to_create": [], "to_delete": [], "changed": False}
    if not p["admin_config"]:
        module.exit_json(msg="no admin_config: bindings computed, the cluster was not contacted", **result)
    if IMPORT_ERROR:
        module.fail_json(
            msg="confluent-kafka is not importable: run with kmirror's virtualenv as the interpreter",
            exception=IMPORT_ERROR,
        )
    conf = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in p["admin_config"].items()}
    # Files the admin settings name (ssl.ca.location, ...) are usually deployed by kmirror_config earlier in
    # the same play: in a check-mode play (files_may_be_missing) they may not exist yet.
    missing = [k for k, v in sorted(conf.items()) if k.endswith(".location") and not os.path.exists(v)]
    if missing:
        if module.check_mode and p["files_may_be_missing"]:
            result["to_create"] = result["bindings"]
            result["changed"] = bool(wanted) and p["state"] == "present"
            module.exit_json(
                msg=f"check mode: the file of admin_config {', '.join(missing)} is not deployed yet; "
                "bindings computed, the cluster was not contacted",
                **result,
            )
        module.fail_json(
            msg=f"admin_config: the file {missing[0]} names does not exist on this host; deploy it first "
            "(kmirror_config deploys /etc/kmirror/<source>/<side>-ca.pem) or correct the path",
            **result,
        )
    try:
        admin = AdminClient(conf)
        have = existing(admin, p["principal"], p["timeout"])
        if p["state"] == "present":
            todo = [b for b in wanted if b not in have]
            after = sorted(have | set(wanted))
            if todo and not module.check_mode:
                for fut in admin.create_acls(
                    [to_kafka(b) for b in todo], request_timeout=p["timeout"]
                ).values():
                    fut.result()
            result["to_create"] = [b.as_dict() for b in todo]
        else:
            todo = [b for b in wanted if b in have]
            after = sorted(have - set(wanted))
            if todo and not module.check_mode:
                filters = [AclBindingFilter(*kafka_fields(b)) for b in todo]
                for fut in admin.delete_acls(filters, request_timeout=p["timeout"]).values():
                    fut.result()
            result["to_delete"] = [b.as_dict() for b in todo]
    except KafkaException as exc:
        module.fail_json(msg=request_failed(exc), **result)
    result["changed"] = bool(todo)
    result["diff"] = {
        "before": "".join(b.render() + "\n" for b in sorted(have)),
        "after": "".join(b.render() + "\n" for b in after),
        "before_header": f"ACLs of {p['principal']} ({p['side']})",
        "after_header": f"ACLs of {p['principal']} ({p['side']})",
    }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
