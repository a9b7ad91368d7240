"""The last steps of a client configuration: safe defaults and refusals, then librdkafka's own check."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kmirror.config import safety
from kmirror.config.capture import captured_log
from kmirror.config.client import ClientConfig, client_conf
from kmirror.errors import ConfigError, Problems, one_line


def finish(cfg: ClientConfig, *, allow_unsafe: bool, problems: Problems | None = None) -> ClientConfig:
    """Apply :mod:`kmirror.config.safety`: refuse engine-owned keys and (unless allowed) unsafe values.

    Also refuse what librdkafka cannot take as it is (whichever step it came from, e.g. a JAAS option's
    ``\\0`` escape): a NUL character, where librdkafka would cut the value, and a lone UTF-16 surrogate,
    which has no UTF-8 form (confluent-kafka crashes on it). Every problem is reported: added to
    `problems` when given, else raised together."""
    found = Problems() if problems is None else problems
    for key, value in cfg.settings.items():
        try:
            _refuse_unusable(key, value, cfg.origin)
        except ConfigError as exc:
            found.add(exc)
    for key, value in safety.ENGINE_OWNED[cfg.role].items():
        if key in cfg.settings and cfg.settings[key].strip().lower() != value:
            found.add(
                ConfigError(
                    f"kmirror sets {key}={value} itself",
                    origin=cfg.origin,
                    key=key,
                    fix=f"remove {key} from the file",
                )
            )
    cfg.violations = safety.violations(cfg.settings, cfg.role, cfg.origin)
    if not allow_unsafe:
        for v in cfg.violations:
            found.add(ConfigError(v.render()))
    cfg.settings = safety.apply(cfg.settings, cfg.role)
    if problems is None:
        found.raise_any()
    return cfg


_UNUSABLE = re.compile("[\x00\ud800-\udfff]")


def shown(key: str) -> str:
    """A key as an error message shows it: as it is, or escaped when it holds unprintable characters."""
    return key if key.isprintable() else ascii(key)


def _refuse_unusable(key: str, value: str, origin: str) -> None:
    for text, what in ((key, "the key"), (value, "the value")):
        bad = _UNUSABLE.search(text)
        if bad is None:
            continue
        problem = (
            f"{what} holds a NUL character, where librdkafka would cut it"
            if bad.group() == "\x00"
            else f"{what} holds a lone UTF-16 surrogate, which has no UTF-8 form for librdkafka"
        )
        raise ConfigError(
            problem,
            origin=origin,
            key=shown(key),
            fix="remove it from the value (or from the JAAS login module option it comes from)",
        )


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
_UNKNOWN_SHOWN = 5  # unknown keys named in the error; the rest are counted
_ROLE_WARNING = re.compile(r"Configuration property (\S+) is a (producer|consumer) property")


def _client_version() -> str:
    import confluent_kafka

    from kmirror.config.kerberos import binding_version

    return f"confluent-kafka {binding_version()}, librdkafka {confluent_kafka.libversion()[0]}"


_PROBE = "kmirror.probe.no.such.key"  # a key librdkafka does not know, so that a probe creates no client


def _is_unknown(key: str, value: object) -> bool:
    """Whether librdkafka does not know ``key`` (set alone, then a key it never knows: no client is made;
    a producer, because a consumer wants a group.id first, and both know the same keys)."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({key: value, _PROBE: "x"})
    except KafkaException as exc:
        m = _NO_SUCH.search(exc.args[0].str())
        return m is not None and m.group(1) == key
    except (TypeError, ValueError):
        return False
    return False


def _unknown_keys(unknown: list[str], origin: str) -> ConfigError:
    first = ", ".join(shown(k) for k in unknown[:_UNKNOWN_SHOWN])
    more = len(unknown) - _UNKNOWN_SHOWN
    names = f"{first} and {more:,} more, {len(unknown):,} in all" if more > 0 else first
    return ConfigError(
        "unknown key"
        + ("s " if len(unknown) > 1 else " ")
        + names
        + " (neither a Java client key kmirror translates nor a librdkafka key)",
        origin=origin,
        fix="fix the spelling or remove it; docs/config-translation.md lists the keys",
    )


def _refusal(exc: Exception, conf: Mapping[str, object], origin: str) -> ConfigError:
    message = exc.args[0].str()
    if "No provider for SASL mechanism GSSAPI" in message:
        return ConfigError(
            f"this kmirror's Kafka client ({_client_version()}) is built without GSSAPI",
            origin=origin,
            key="sasl.mechanism=GSSAPI",
            fix="install kmirror with the GSSAPI-capable client (the kmirror_worker role does it "
            "for hosts with a Kerberos cluster; docs/deployment.md)",
        )
    return ConfigError(
        _as_written(message, conf)
        .removeprefix("Failed to create consumer: ")
        .removeprefix("Failed to create producer: ")
        .strip(),
        origin=origin,
        fix="correct the value (see docs/config-translation.md)",
    )


def _checkable(cfg: ClientConfig) -> dict[str, object]:
    """The settings librdkafka is asked about, offline. Values :func:`finish` refused as unusable are
    left out: the client would cut or crash on them."""
    conf: dict[str, object] = {
        k: v
        for k, v in client_conf(cfg.settings).items()
        if k != "bootstrap.servers" and not _UNUSABLE.search(k) and not _UNUSABLE.search(str(v))
    }
    if cfg.role == "consumer":
        conf.setdefault("group.id", "kmirror-check")  # a missing group.id is reported on its own
    return conf


def check_unknown_keys(cfg: ClientConfig) -> None:
    """Only the keys librdkafka does not know (for a file with other problems already, whose settings
    as a whole need not make sense yet)."""
    conf = _checkable(cfg)
    unknown = [k for k in conf if _is_unknown(k, conf[k])]
    if unknown:
        raise _unknown_keys(unknown, cfg.origin)


def validate_with_librdkafka(cfg: ClientConfig) -> None:
    """Let librdkafka check every key and value, offline (no bootstrap servers, nothing connects).

    Unknown keys are collected and reported together; keys that belong to the other role become notes.
    """
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = _checkable(cfg)
    if "sasl.kerberos.keytab" in conf:
        # Offline: no background kinit into the user's ticket cache (kmirror.config.kerberos logs in
        # for real).
        conf["sasl.kerberos.min.time.before.relogin"] = 0
    make = Consumer if cfg.role == "consumer" else Producer
    with captured_log("validate") as (logger, lines):
        try:
            client = make(conf, logger=logger)
        except KafkaException as exc:
            if not _NO_SUCH.search(exc.args[0].str()):
                raise _refusal(exc, conf, cfg.origin) from None
            # One unknown key or many: find them all in one pass, then check the rest as a whole.
            unknown = [k for k in conf if _is_unknown(k, conf[k])]
            if unknown:
                raise _unknown_keys(unknown, cfg.origin) from None
            raise _refusal(exc, conf, cfg.origin) from None
        except (TypeError, ValueError) as exc:  # a key the Python client reads itself (error_cb=...)
            raise ConfigError(
                one_line(str(exc)),
                origin=cfg.origin,
                fix="remove the key (kmirror sets the client's callbacks itself)",
            ) from None
        if isinstance(client, Consumer):
            client.poll(0)
            client.close()
        else:
            client.poll(0)
    for line in lines:
        m = _ROLE_WARNING.search(line)
        if m:
            key = _as_written(m.group(1), cfg.settings)
            cfg.notes.append(f"{key}: ignored (a {m.group(2)} setting has no effect in a {cfg.role} file)")
