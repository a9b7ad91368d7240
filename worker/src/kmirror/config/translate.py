"""Translate a parsed properties file (Java and MirrorMaker-era keys, JAAS, key stores) to librdkafka's.

Pure except reading the JAAS files the properties name. The key table is :mod:`kmirror.config.translation`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kmirror.config import translation
from kmirror.config.client import ClientConfig
from kmirror.config.converters import check_brokers
from kmirror.config.jaas import LoginModule, load_jaas_file, parse_jaas_config_value
from kmirror.config.safety import Role
from kmirror.config.secrets import MASK, is_secret
from kmirror.errors import ConfigError, Problems


@dataclass
class _Translation:
    settings: dict[str, str] = field(default_factory=dict)
    source_key: dict[str, str] = field(default_factory=dict)  # librdkafka key -> key in the file
    notes: list[str] = field(default_factory=list)
    special: dict[str, str] = field(default_factory=dict)


def translate(
    props: Mapping[str, str],
    role: Role,
    origin: str,
    env: Mapping[str, str] | None = None,
    problems: Problems | None = None,
) -> ClientConfig:
    """Translate parsed properties (no I/O beyond JAAS files named in them).

    Every problem is found in one pass: with `problems` given they are added to it and the (partial)
    configuration is returned; without, they are raised together at the end."""
    env = os.environ if env is None else env
    found = Problems() if problems is None else problems
    t = _Translation()
    for key, value in props.items():
        try:  # (not found.check(): a context manager per key costs seconds on a 50,000-key file)
            _translate_key(t, key, value, role, origin)
        except ConfigError as exc:
            found.add(exc)
    cfg = ClientConfig(origin, role, t.settings, t.notes)
    with found.check():
        _stores(t, origin)
    with found.check():
        _sasl(t, origin, env)
    cfg.include = t.special.get("mirror.topics.whitelist")
    cfg.exclude = t.special.get("mirror.topics.blacklist")
    if role == "consumer" and not cfg.settings.get("group.id"):
        found.add(
            ConfigError(
                "no consumer group",
                origin=origin,
                key="group.id",
                fix="set group.id=NAME (every kmirror process of one mirror uses the same group)",
            )
        )
    if not cfg.settings.get("bootstrap.servers"):
        if not any(key in props for key in translation.ZOOKEEPER_CONNECT):  # its refusal says it
            found.add(
                ConfigError(
                    "no brokers to connect to",
                    origin=origin,
                    key="bootstrap.servers",
                    fix="set bootstrap.servers=HOST:PORT[,HOST:PORT]",
                )
            )
    else:
        with found.check():
            check_brokers(cfg.settings["bootstrap.servers"], origin, t.source_key["bootstrap.servers"])
    if problems is None:
        found.raise_any()
    return cfg


def _translate_key(t: _Translation, key: str, value: str, role: Role, origin: str) -> None:
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
_SHELL_BLANKS = re.compile(r"[ \t\n]+")


def _jaas_from_env(env: Mapping[str, str]) -> str | None:
    # Kafka's scripts expand $KAFKA_OPTS unquoted: the shell splits it at blanks and removes no quotes;
    # the JVM keeps the last of repeated -D options.
    found = None
    for word in _SHELL_BLANKS.split(env.get("KAFKA_OPTS", "")):
        m = _KAFKA_OPTS_JAAS.match(word)
        if m:
            found = m.group(1)
    return found


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
