"""The last steps of a client configuration: safe defaults and refusals, then librdkafka's own check."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kmirror.config import safety
from kmirror.config.capture import captured_log
from kmirror.config.client import ClientConfig, client_conf
from kmirror.errors import ConfigError


def finish(cfg: ClientConfig, *, allow_unsafe: bool) -> ClientConfig:
    """Apply :mod:`kmirror.config.safety`: refuse engine-owned keys and (unless allowed) unsafe values."""
    for key, value in safety.ENGINE_OWNED[cfg.role].items():
        if key in cfg.settings and cfg.settings[key].strip().lower() != value:
            raise ConfigError(
                f"kmirror sets {key}={value} itself",
                origin=cfg.origin,
                key=key,
                fix=f"remove {key} from the file",
            )
    cfg.violations = safety.violations(cfg.settings, cfg.role, cfg.origin)
    if cfg.violations and not allow_unsafe:
        raise ConfigError(cfg.violations[0].render())
    cfg.settings = safety.apply(cfg.settings, cfg.role)
    return cfg


# librdkafka names a property by its canonical name in messages; operators wrote the alias.
_CANONICAL = {
    "linger.ms": "queue.buffering.max.ms",
    "acks": "request.required.acks",
    "retries": "message.send.max.retries",
    "compression.type": "compression.codec",
    "delivery.timeout.ms": "message.timeout.ms",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "sasl.mechanism": "sasl.mechanisms",
    "max.partition.fetch.bytes": "fetch.message.max.bytes",
}


def _as_written(text: str, settings: Mapping[str, object]) -> str:
    """Replace librdkafka's canonical property names in a message by the alias the settings use."""
    for alias, canonical in _CANONICAL.items():
        if alias in settings and canonical not in settings:
            text = re.sub(rf"(?<![\w.]){re.escape(canonical)}(?![\w.])", alias, text)
    return text


_NO_SUCH = re.compile(r'No such configuration property: "([^"]+)"')
_ROLE_WARNING = re.compile(r"Configuration property (\S+) is a (producer|consumer) property")


def _client_version() -> str:
    import confluent_kafka

    from kmirror.config.kerberos import binding_version

    return f"confluent-kafka {binding_version()}, librdkafka {confluent_kafka.libversion()[0]}"


def validate_with_librdkafka(cfg: ClientConfig) -> None:
    """Let librdkafka check every key and value, offline (no bootstrap servers, nothing connects).

    Unknown keys are collected and reported together; keys that belong to the other role become notes.
    """
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {k: v for k, v in client_conf(cfg.settings).items() if k != "bootstrap.servers"}
    if "sasl.kerberos.keytab" in conf:
        # Offline: no background kinit into the user's ticket cache (kmirror.config.kerberos logs in
        # for real).
        conf["sasl.kerberos.min.time.before.relogin"] = 0
    unknown: list[str] = []
    with captured_log("validate") as (logger, lines):
        while True:
            try:
                client = (
                    Consumer(conf, logger=logger) if cfg.role == "consumer" else Producer(conf, logger=logger)
                )
            except KafkaException as exc:
                message = exc.args[0].str()
                m = _NO_SUCH.search(message)
                if m and m.group(1) in conf:
                    unknown.append(m.group(1))
                    del conf[m.group(1)]
                    continue
                if "No provider for SASL mechanism GSSAPI" in message:
                    raise ConfigError(
                        f"this kmirror's Kafka client ({_client_version()}) is built without GSSAPI",
                        origin=cfg.origin,
                        key="sasl.mechanism=GSSAPI",
                        fix="install kmirror with the GSSAPI-capable client (the kmirror_worker role does it "
                        "for hosts with a Kerberos cluster; docs/deployment.md)",
                    ) from None
                raise ConfigError(
                    _as_written(message, conf)
                    .removeprefix("Failed to create consumer: ")
                    .removeprefix("Failed to create producer: ")
                    .strip(),
                    origin=cfg.origin,
                    fix="correct the value (see docs/config-translation.md)",
                ) from None
            if isinstance(client, Consumer):
                client.poll(0)
                client.close()
            else:
                client.poll(0)
            break
    if unknown:
        raise ConfigError(
            "unknown key"
            + ("s " if len(unknown) > 1 else " ")
            + ", ".join(unknown)
            + " (neither a Java client key kmirror translates nor a librdkafka key)",
            origin=cfg.origin,
            fix="fix the spelling or remove it; docs/config-translation.md lists the keys",
        )
    for line in lines:
        m = _ROLE_WARNING.search(line)
        if m:
            key = _as_written(m.group(1), cfg.settings)
            cfg.notes.append(f"{key}: ignored (a {m.group(2)} setting has no effect in a {cfg.role} file)")
