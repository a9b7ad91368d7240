"""Consumer and producer properties files → effective librdkafka settings.

The path is one-directional: parse (:mod:`kmirror.properties`) → translate Java and legacy keys
(:mod:`kmirror.translation`) → JAAS and key stores → safe defaults and refusals
(:mod:`kmirror.safety`) → librdkafka's own check of every key and value.
Everything here is pure except reading the files and librdkafka's offline check.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kmirror import safety, translation
from kmirror.errors import ConfigError
from kmirror.jaas import LoginModule, load_jaas_file, parse_jaas_config_value
from kmirror.properties import load_properties
from kmirror.safety import Role, Violation
from kmirror.secrets import SECRET_MARKERS, is_secret  # noqa: F401 (the one secret rule, re-exported)

MASK = "********"


# Keys that confluent-kafka's Python layer reads itself and wants as Python values, not strings.
_PYTHON_BOOL_KEYS = frozenset({"delivery.report.only.error"})


def client_conf(settings: Mapping[str, str]) -> dict[str, object]:
    """Settings as confluent-kafka's constructors take them."""
    return {k: (v.strip().lower() == "true" if k in _PYTHON_BOOL_KEYS else v) for k, v in settings.items()}


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) else v) for k, v in settings.items()}


@dataclass
class ClientConfig:
    """One properties file, translated: what librdkafka gets, and what was done to get there."""

    origin: str
    role: Role
    settings: dict[str, str]
    notes: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    include: str | None = None  # legacy mirror.topics.whitelist
    exclude: str | None = None  # legacy mirror.topics.blacklist

    @property
    def safe(self) -> bool:
        return not self.violations

    def masked(self) -> dict[str, str]:
        return masked(self.settings)


# --------------------------------------------------------------------------------------------------
# Translation (pure)
# --------------------------------------------------------------------------------------------------


@dataclass
class _Translation:
    settings: dict[str, str] = field(default_factory=dict)
    source_key: dict[str, str] = field(default_factory=dict)  # librdkafka key -> key in the file
    notes: list[str] = field(default_factory=list)
    special: dict[str, str] = field(default_factory=dict)


def translate(
    props: Mapping[str, str], role: Role, origin: str, env: Mapping[str, str] | None = None
) -> ClientConfig:
    """Translate parsed properties (no I/O beyond JAAS files named in them)."""
    env = os.environ if env is None else env
    t = _Translation()
    for key, value in props.items():
        rule = translation.rule_for(key, role)
        if rule is None:
            _put(t, key, key, value, origin)
        elif rule.action == "refuse":
            raise ConfigError("not supported", origin=origin, key=key, fix=rule.note)
        elif rule.action == "ignore":
            t.notes.append(f"{key}: ignored ({rule.note})")
        elif rule.action == "special" and not rule.applies_to(role):
            # Read only from the other side's file (e.g. mirror.topics.whitelist): never dropped silently.
            raise ConfigError(
                f"a {rule.scope} setting in a {role} file ({rule.note}); kmirror would ignore it here",
                origin=origin,
                key=key,
                fix=f"move it to the {rule.scope} file"
                + (
                    " of the source cluster, or give the filter on the command line"
                    if key.startswith("mirror.topics.")
                    else ""
                ),
            )
        elif rule.action == "special":
            t.special[key] = value
        else:
            assert rule.target is not None
            converted = rule.convert(value, origin) if rule.convert else value
            if rule.target != key or converted != value:
                t.notes.append(f"{key}={_show(key, value)} -> {rule.target}={_show(key, converted)}")
            _put(t, key, rule.target, converted, origin)
    cfg = ClientConfig(origin, role, t.settings, t.notes)
    _stores(t, origin)
    _sasl(t, origin, env)
    cfg.include = t.special.get("mirror.topics.whitelist")
    cfg.exclude = t.special.get("mirror.topics.blacklist")
    if role == "consumer" and not cfg.settings.get("group.id"):
        raise ConfigError(
            "no consumer group",
            origin=origin,
            key="group.id",
            fix="set group.id=NAME (every kmirror process of one mirror uses the same group)",
        )
    if not cfg.settings.get("bootstrap.servers"):
        raise ConfigError(
            "no brokers to connect to",
            origin=origin,
            key="bootstrap.servers",
            fix="set bootstrap.servers=HOST:PORT[,HOST:PORT]",
        )
    return cfg


def _show(key: str, value: str) -> str:
    return MASK if is_secret(key) else value


def _put(t: _Translation, file_key: str, target: str, value: str, origin: str) -> None:
    earlier = t.source_key.get(target)
    if earlier is not None and earlier != file_key and t.settings[target] != value:
        raise ConfigError(
            f"sets {target} to {_show(target, value)!r} while {earlier} sets it to "
            f"{_show(target, t.settings[target])!r}",
            origin=origin,
            key=file_key,
            fix=f"keep only one of {earlier} and {file_key}",
        )
    t.settings[target] = value
    t.source_key[target] = file_key


_CONVERT_TRUSTSTORE = (
    "convert it to PEM (keytool -exportcert -rfc -keystore FILE -alias CA > ca.pem, or "
    "openssl pkcs12 -in FILE -nokeys -out ca.pem) and set ssl.ca.location=ca.pem"
)
_CONVERT_KEYSTORE = (
    "convert it to PKCS12 (keytool -importkeystore -srckeystore FILE -destkeystore client.p12 "
    "-deststoretype PKCS12) and set ssl.keystore.type=PKCS12, ssl.keystore.location=client.p12, or set "
    "ssl.certificate.location and ssl.key.location to PEM files"
)


def _stores(t: _Translation, origin: str) -> None:
    sp = t.special
    if "ssl.truststore.location" in sp:
        kind = sp.get("ssl.truststore.type", "JKS").strip().upper()
        if kind != "PEM":
            raise ConfigError(
                f"{kind} truststores cannot be read by librdkafka",
                origin=origin,
                key="ssl.truststore.location",
                fix=_CONVERT_TRUSTSTORE,
            )
        _put(t, "ssl.truststore.location", "ssl.ca.location", sp["ssl.truststore.location"], origin)
        t.notes.append("ssl.truststore.location (PEM) -> ssl.ca.location")
    if "ssl.keystore.location" in sp:
        kind = sp.get("ssl.keystore.type", "JKS").strip().upper()
        if kind == "PEM":
            raise ConfigError(
                "PEM keystores are not read as one file by librdkafka",
                origin=origin,
                key="ssl.keystore.location",
                fix="set ssl.certificate.location and ssl.key.location to the PEM files",
            )
        if kind != "PKCS12":
            raise ConfigError(
                f"{kind} keystores cannot be read by librdkafka",
                origin=origin,
                key="ssl.keystore.location",
                fix=_CONVERT_KEYSTORE,
            )
        _put(t, "ssl.keystore.location", "ssl.keystore.location", sp["ssl.keystore.location"], origin)
        if "ssl.keystore.password" in sp:
            _put(t, "ssl.keystore.password", "ssl.keystore.password", sp["ssl.keystore.password"], origin)
    for key in (
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.keystore.password",
        "ssl.keystore.type",
    ):
        store = key.rsplit(".", 1)[0] + ".location"
        if key in sp and store not in sp:
            t.notes.append(f"{key}: ignored (no {store})")


_KAFKA_OPTS_JAAS = re.compile(r"^-Djava\.security\.auth\.login\.config=(.+)$")


def _jaas_from_env(env: Mapping[str, str]) -> str | None:
    for word in shlex.split(env.get("KAFKA_OPTS", "")):
        m = _KAFKA_OPTS_JAAS.match(word)
        if m:
            return m.group(1)
    return None


def _sasl(t: _Translation, origin: str, env: Mapping[str, str]) -> None:
    sp = t.special
    protocol = t.settings.get("security.protocol", "plaintext").lower()
    if "sasl.jaas.config" in sp:
        modules = parse_jaas_config_value(sp["sasl.jaas.config"], origin)
        where, key = "sasl.jaas.config", "sasl.jaas.config"
    else:
        path = sp.get("java.security.auth.login.config")
        key = "java.security.auth.login.config"
        if path is None and protocol.startswith("sasl"):
            path = _jaas_from_env(env)
            key = "KAFKA_OPTS -Djava.security.auth.login.config"
        if path is None:
            if protocol.startswith("sasl") and not _has_native_sasl(t.settings):
                raise ConfigError(
                    f"security.protocol={protocol.upper()} but no credentials",
                    origin=origin,
                    key="sasl.jaas.config",
                    fix="set sasl.jaas.config, java.security.auth.login.config=JAAS_FILE, or "
                    "sasl.username/sasl.password (SCRAM, PLAIN) or sasl.kerberos.* (GSSAPI)",
                )
            return
        sections = load_jaas_file(path)
        if "KafkaClient" not in sections:
            raise ConfigError(
                f"JAAS file {path} has no KafkaClient section",
                origin=origin,
                key=key,
                fix="add a KafkaClient { ... }; section with the mirror's login module",
            )
        modules = sections["KafkaClient"]
        where = f"{path} KafkaClient"
    if len(modules) != 1:
        raise ConfigError(
            f"{len(modules)} login modules in {where}",
            origin=origin,
            key=key,
            fix="keep exactly one login module for the Kafka client",
        )
    for k, v in _login_module_settings(modules[0], t.settings, origin, key).items():
        _put(t, key, k, v, origin)
    t.notes.append(f"{key}: {modules[0].class_name.rsplit('.', 1)[-1]} -> sasl.* settings")


def _has_native_sasl(settings: Mapping[str, str]) -> bool:
    return any(
        k in settings
        for k in (
            "sasl.username",
            "sasl.kerberos.keytab",
            "sasl.oauthbearer.method",
            "sasl.kerberos.principal",
        )
    )


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() == "true"


def _login_module_settings(
    module: LoginModule, settings: Mapping[str, str], origin: str, key: str
) -> dict[str, str]:
    name = module.class_name.rsplit(".", 1)[-1]
    opts = module.options
    mechanism = settings.get("sasl.mechanisms", "").strip().upper()

    def need(option: str) -> str:
        value = opts.get(option)
        if not value:
            raise ConfigError(
                f"{name} has no {option}",
                origin=origin,
                key=key,
                fix=f'add {option}="..." to the login module',
            )
        return value

    def expect(*allowed: str) -> str:
        if mechanism and mechanism not in allowed:
            raise ConfigError(
                f"sasl.mechanism={mechanism} does not match {name}",
                origin=origin,
                key="sasl.mechanism",
                fix=f"set sasl.mechanism={allowed[0]}",
            )
        return mechanism or allowed[0]

    if name == "Krb5LoginModule":
        out = {"sasl.mechanisms": expect("GSSAPI")}
        if _truthy(opts.get("useKeyTab")):
            out["sasl.kerberos.keytab"] = need("keyTab")
            out["sasl.kerberos.principal"] = need("principal")
        elif _truthy(opts.get("useTicketCache")):
            # No keytab: use the ticket cache someone else keeps fresh; do not run kinit.
            out["sasl.kerberos.min.time.before.relogin"] = "0"
            if opts.get("principal"):
                out["sasl.kerberos.principal"] = opts["principal"]
        else:
            raise ConfigError(
                "Krb5LoginModule with neither useKeyTab=true nor useTicketCache=true",
                origin=origin,
                key=key,
                fix='set useKeyTab=true with keyTab="FILE" and principal="NAME@REALM"',
            )
        if opts.get("serviceName") and "sasl.kerberos.service.name" not in settings:
            out["sasl.kerberos.service.name"] = opts["serviceName"]
        return out
    if name == "ScramLoginModule":
        if not mechanism.startswith("SCRAM-SHA-"):
            raise ConfigError(
                "ScramLoginModule needs the SCRAM variant",
                origin=origin,
                key="sasl.mechanism",
                fix="set sasl.mechanism=SCRAM-SHA-512 (or SCRAM-SHA-256, as the brokers use)",
            )
        return {
            "sasl.mechanisms": mechanism,
            "sasl.username": need("username"),
            "sasl.password": need("password"),
        }
    if name == "PlainLoginModule":
        return {
            "sasl.mechanisms": expect("PLAIN"),
            "sasl.username": need("username"),
            "sasl.password": need("password"),
        }
    raise ConfigError(
        f"login module {module.class_name} is not supported",
        origin=origin,
        key=key,
        fix="use Krb5LoginModule, ScramLoginModule or PlainLoginModule, or set librdkafka's "
        "sasl.* keys directly (e.g. sasl.oauthbearer.* for OAUTHBEARER)",
    )


# --------------------------------------------------------------------------------------------------
# Safety and librdkafka's own check
# --------------------------------------------------------------------------------------------------


def finish(cfg: ClientConfig, *, allow_unsafe: bool) -> ClientConfig:
    """Apply :mod:`kmirror.safety`: refuse engine-owned keys and (unless allowed) unsafe values."""
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


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


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

    from kmirror.kerberos import binding_version

    return f"confluent-kafka {binding_version()}, librdkafka {confluent_kafka.libversion()[0]}"


def validate_with_librdkafka(cfg: ClientConfig) -> None:
    """Let librdkafka check every key and value, offline (no bootstrap servers, nothing connects).

    Unknown keys are collected and reported together; keys that belong to the other role become notes.
    """
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {k: v for k, v in client_conf(cfg.settings).items() if k != "bootstrap.servers"}
    if "sasl.kerberos.keytab" in conf:
        # Offline: no background kinit into the user's ticket cache (kmirror.kerberos logs in for real).
        conf["sasl.kerberos.min.time.before.relogin"] = 0
    unknown: list[str] = []
    handler = _Collect()
    logger = logging.getLogger(f"kmirror.validate.{id(handler)}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
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
    finally:
        logger.removeHandler(handler)
    if unknown:
        raise ConfigError(
            "unknown key"
            + ("s " if len(unknown) > 1 else " ")
            + ", ".join(unknown)
            + " (neither a Java client key kmirror translates nor a librdkafka key)",
            origin=cfg.origin,
            fix="fix the spelling or remove it; docs/config-translation.md lists the keys",
        )
    for line in handler.lines:
        m = _ROLE_WARNING.search(line)
        if m:
            key = _as_written(m.group(1), cfg.settings)
            cfg.notes.append(f"{key}: ignored (a {m.group(2)} setting has no effect in a {cfg.role} file)")


def load_client_config(
    path: str | os.PathLike[str],
    role: Role,
    *,
    allow_unsafe: bool = False,
    env: Mapping[str, str] | None = None,
    validate: bool = True,
) -> ClientConfig:
    """Read, translate, make safe and check one consumer or producer properties file."""
    origin = str(path)
    if not Path(path).is_file():
        raise ConfigError(
            "file not found", origin=origin, fix=f"give the path of an existing {role} properties file"
        )
    cfg = finish(translate(load_properties(path), role, origin, env), allow_unsafe=allow_unsafe)
    if validate:
        validate_with_librdkafka(cfg)
    return cfg


# Keys an AdminClient can take from a consumer or producer config (connection and security only).
_ADMIN_PREFIXES = (
    "bootstrap.servers",
    "security.",
    "ssl.",
    "sasl.",
    "client.id",
    "socket.",
    "broker.address.",
    "client.dns.lookup",
    "reconnect.backoff",
    "retry.backoff",
    "request.timeout.ms",
    "metadata.max.age.ms",
    "connections.max.idle.ms",
    "api.version",
)


def admin_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The connection and security part of a client config, for an AdminClient on the same cluster."""
    return {k: v for k, v in settings.items() if k.startswith(_ADMIN_PREFIXES)}
