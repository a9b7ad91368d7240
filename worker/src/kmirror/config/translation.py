"""Java client and legacy MirrorMaker keys, translated to librdkafka: the one translation table.

Each :class:`Rule` says what happens to one key found in a consumer or producer properties file:

* ``rename``: the value goes to a librdkafka key (optionally converted);
* ``ignore``: accepted, has no effect in kmirror, and is reported with the reason;
* ``refuse``: the file is rejected with the fix;
* ``special``: handled by :mod:`kmirror.config` (JAAS, key/trust stores, topic filters).

Keys not in the table are handed to librdkafka unchanged; librdkafka itself then decides whether
it knows them (see :func:`kmirror.config.validate_with_librdkafka`). ``docs/config-translation.md``
is generated from this table (``kmirror config-keys --markdown``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kmirror.config import converters

Action = Literal["rename", "ignore", "refuse", "special"]
Scope = Literal["consumer", "producer", "both"]


@dataclass(frozen=True)
class Rule:
    key: str
    action: Action
    note: str
    target: str | None = None
    scope: Scope = "both"
    convert: Callable[[str, str], str] | None = None  # (value, origin) -> librdkafka value

    def applies_to(self, role: str) -> bool:
        return self.scope in ("both", role)


_ZK_FIX = (
    "ZooKeeper is not used by kmirror; set bootstrap.servers=HOST:PORT[,HOST:PORT] of the brokers instead"
)
_ZK_SETTING_FIX = "ZooKeeper is not used by kmirror; delete the line"
ZOOKEEPER_CONNECT = ("zk.connect", "zookeeper.connect")
_BYTES_NOTE = "kmirror copies raw bytes: keys and values are never (de)serialized"


def _rename(
    key: str,
    target: str,
    note: str = "",
    scope: Scope = "both",
    convert: Callable[[str, str], str] | None = None,
) -> Rule:
    return Rule(key, "rename", note or f"same meaning as librdkafka's {target}", target, scope, convert)


def _ignore(key: str, note: str, scope: Scope = "both") -> Rule:
    return Rule(key, "ignore", note, None, scope)


def _refuse(key: str, fix: str, scope: Scope = "both") -> Rule:
    return Rule(key, "refuse", fix, None, scope)


def _special(key: str, note: str, scope: Scope = "both") -> Rule:
    return Rule(key, "special", note, None, scope)


RULES: tuple[Rule, ...] = (
    # Connection
    _rename(
        "broker.list",
        "bootstrap.servers",
        "Kafka 0.7 broker list (id:host:port), ids dropped",
        convert=converters.broker_list,
    ),
    _rename(
        "metadata.broker.list", "bootstrap.servers", "Kafka 0.8 broker list", convert=converters.broker_list
    ),
    _refuse("zk.connect", _ZK_FIX),
    _refuse("zookeeper.connect", _ZK_FIX),
    _refuse("zk.connectiontimeout.ms", _ZK_SETTING_FIX),
    _refuse("zk.sessiontimeout.ms", _ZK_SETTING_FIX),
    _refuse("zk.synctime.ms", _ZK_SETTING_FIX),
    _refuse("zookeeper.connection.timeout.ms", _ZK_SETTING_FIX),
    _refuse("zookeeper.session.timeout.ms", _ZK_SETTING_FIX),
    _refuse("zookeeper.sync.time.ms", _ZK_SETTING_FIX),
    _rename("receive.buffer.bytes", "socket.receive.buffer.bytes"),
    _rename("send.buffer.bytes", "socket.send.buffer.bytes"),
    _rename(
        "socket.buffersize",
        "socket.receive.buffer.bytes",
        "Kafka 0.7 consumer socket buffer",
        scope="consumer",
    ),
    _rename("socket.receive.buffer.bytes", "socket.receive.buffer.bytes", "Kafka 0.8 consumer socket buffer"),
    _rename("connect.timeout.ms", "socket.connection.setup.timeout.ms", "Kafka 0.7 connect timeout"),
    _ignore("reconnect.interval", "Kafka 0.7 producer setting; librdkafka reconnects with backoff"),
    _ignore("reconnect.time.interval.ms", "Kafka 0.7 producer setting; librdkafka reconnects with backoff"),
    _rename("timeout.ms", "request.timeout.ms", "old producer's acknowledgement timeout", scope="producer"),
    _ignore("metadata.fetch.timeout.ms", "old Java producer setting; librdkafka fetches metadata itself"),
    _ignore("default.api.timeout.ms", "Java-only; kmirror bounds each call itself"),
    _ignore("max.block.ms", "kmirror waits for room in the queue without limit and never drops records"),
    # Consumer group and offsets
    _rename("groupid", "group.id", "Kafka 0.7 group id", scope="consumer"),
    _rename("auto.commit.enable", "enable.auto.commit", "Kafka 0.8 name", scope="consumer"),
    _rename(
        "auto.commit.enabled", "enable.auto.commit", "spelling used in MirrorMaker guides", scope="consumer"
    ),
    _rename("autocommit.enable", "enable.auto.commit", "Kafka 0.7 name", scope="consumer"),
    _rename("autocommit.interval.ms", "auto.commit.interval.ms", "Kafka 0.7 name", scope="consumer"),
    _rename(
        "auto.offset.reset",
        "auto.offset.reset",
        "smallest/largest become earliest/latest",
        scope="consumer",
        convert=converters.offset_reset,
    ),
    _rename(
        "autooffset.reset",
        "auto.offset.reset",
        "Kafka 0.7 name; smallest/largest map to earliest/latest",
        scope="consumer",
        convert=converters.offset_reset,
    ),
    _rename(
        "fetch.size", "max.partition.fetch.bytes", "Kafka 0.7 bytes per partition per fetch", scope="consumer"
    ),
    _rename("fetch.max.wait.ms", "fetch.wait.max.ms", scope="consumer"),
    _rename("fetch.message.max.bytes", "max.partition.fetch.bytes", "Kafka 0.8 name", scope="consumer"),
    _rename(
        "partition.assignment.strategy",
        "partition.assignment.strategy",
        "Java assignor classes become librdkafka names",
        scope="consumer",
        convert=converters.assignors,
    ),
    _ignore(
        "max.poll.records", "kmirror reads in batches of its own size (see --queue.size)", scope="consumer"
    ),
    _ignore(
        "consumer.timeout.ms", "old consumer setting; kmirror runs until it is stopped", scope="consumer"
    ),
    _ignore("consumer.id", "old ZooKeeper consumer id; the broker assigns member ids", scope="consumer"),
    _ignore(
        "rebalance.max.retries", "old ZooKeeper consumer; brokers coordinate groups now", scope="consumer"
    ),
    _ignore(
        "rebalance.backoff.ms", "old ZooKeeper consumer; brokers coordinate groups now", scope="consumer"
    ),
    _ignore(
        "queued.max.message.chunks",
        "old consumer prefetch; librdkafka bounds prefetch with queued.max.messages.kbytes",
        scope="consumer",
    ),
    _ignore(
        "shallow.iterator.enable",
        "Kafka 0.7 only (KAFKA-732); kmirror re-batches records and compresses them per compression.type",
        scope="consumer",
    ),
    _ignore(
        "exclude.internal.topics",
        "kmirror never mirrors internal topics (names starting with __)",
        scope="consumer",
    ),
    _ignore("mirror.consumer.numthreads", "Kafka 0.7 setting; use --num.streams", scope="consumer"),
    _special(
        "mirror.topics.whitelist",
        "Kafka 0.7 topic filter; used as --whitelist when that is not given",
        scope="consumer",
    ),
    _special(
        "mirror.topics.blacklist",
        "Kafka 0.7 topic filter; used as --blacklist when that is not given",
        scope="consumer",
    ),
    # Producer
    _rename("acks", "acks", "-1 becomes all", scope="producer", convert=converters.acks),
    _rename(
        "request.required.acks",
        "acks",
        "Kafka 0.8 name; -1 becomes all",
        scope="producer",
        convert=converters.acks,
    ),
    _rename(
        "max.in.flight.requests.per.connection", "max.in.flight.requests.per.connection", scope="producer"
    ),
    _rename("max.in.flight", "max.in.flight.requests.per.connection", "librdkafka alias", scope="producer"),
    _rename("message.send.max.retries", "retries", "Kafka 0.8 name", scope="producer"),
    _rename("delivery.timeout.ms", "message.timeout.ms", scope="producer"),
    _rename("max.request.size", "message.max.bytes", scope="producer"),
    _rename("max.message.size", "message.max.bytes", "Kafka 0.7 name", scope="producer"),
    _rename(
        "buffer.memory",
        "queue.buffering.max.kbytes",
        "bytes become kilobytes",
        scope="producer",
        convert=converters.kbytes,
    ),
    _rename("queue.time", "linger.ms", "Kafka 0.7 name", scope="producer"),
    _rename("queue.buffering.max.ms", "linger.ms", "Kafka 0.8 name", scope="producer"),
    _rename(
        "compression.codec",
        "compression.type",
        "0-4 and codec class names become names",
        scope="producer",
        convert=converters.codec,
    ),
    _ignore("compressed.topics", "kmirror compresses every topic per compression.type", scope="producer"),
    _ignore(
        "producer.type",
        "kmirror always sends asynchronously and blocks when its queue is full",
        scope="producer",
    ),
    _ignore(
        "queue.enqueueTimeout.ms",
        "kmirror always blocks when its queue is full and never drops (MirrorMaker's safe -1)",
        scope="producer",
    ),
    _ignore(
        "queue.enqueue.timeout.ms",
        "kmirror always blocks when its queue is full and never drops (MirrorMaker's safe -1)",
        scope="producer",
    ),
    _ignore(
        "block.on.buffer.full",
        "kmirror always blocks when its queue is full and never drops",
        scope="producer",
    ),
    _ignore("queue.size", "Kafka 0.7 async queue; use --queue.size", scope="producer"),
    _ignore(
        "partitioner.class",
        "kmirror keeps the source partition, or hashes keys like Java's "
        "default partitioner when the target has fewer partitions",
        scope="producer",
    ),
    _ignore("serializer.class", _BYTES_NOTE, scope="producer"),
    _ignore("key.serializer.class", _BYTES_NOTE, scope="producer"),
    _ignore("key.serializer", _BYTES_NOTE, scope="producer"),
    _ignore("value.serializer", _BYTES_NOTE, scope="producer"),
    _ignore("key.deserializer", _BYTES_NOTE, scope="consumer"),
    _ignore("value.deserializer", _BYTES_NOTE, scope="consumer"),
    _refuse(
        "transactional.id",
        "kmirror does not use producer transactions; remove transactional.id",
        scope="producer",
    ),
    # Security
    _rename("sasl.mechanism", "sasl.mechanisms"),
    _special("sasl.jaas.config", "JAAS login module becomes sasl.* settings (Kerberos, SCRAM, PLAIN)"),
    _special(
        "java.security.auth.login.config",
        "path of a JAAS file whose KafkaClient section is used for this client only",
    ),
    _special(
        "ssl.truststore.location",
        "PEM truststores become ssl.ca.location; JKS/PKCS12 are refused with the conversion command",
    ),
    _special("ssl.truststore.password", "used only with the truststore"),
    _special("ssl.truststore.type", "PEM, JKS or PKCS12"),
    _special(
        "ssl.keystore.location", "PKCS12 keystores are used as is; JKS is refused with the conversion command"
    ),
    _special("ssl.keystore.password", "used only with the keystore"),
    _special("ssl.keystore.type", "PKCS12, JKS or PEM"),
    _rename(
        "ssl.endpoint.identification.algorithm",
        "ssl.endpoint.identification.algorithm",
        "empty becomes none",
        convert=converters.endpoint_identification,
    ),
    _ignore("ssl.protocol", "OpenSSL negotiates the highest TLS version both sides support"),
    _ignore("ssl.enabled.protocols", "OpenSSL negotiates the highest TLS version both sides support"),
    _ignore("ssl.keymanager.algorithm", "Java-only"),
    _ignore("ssl.trustmanager.algorithm", "Java-only"),
    _ignore("ssl.secure.random.implementation", "Java-only"),
    _ignore("sasl.kerberos.ticket.renew.window.factor", "Java-only; librdkafka re-runs kinit itself"),
    _ignore("sasl.kerberos.ticket.renew.jitter", "Java-only; librdkafka re-runs kinit itself"),
    _ignore(
        "sasl.kerberos.min.time.before.relogin.ms", "use librdkafka's sasl.kerberos.min.time.before.relogin"
    ),
    _ignore("sasl.login.class", "Java-only"),
    _ignore("sasl.login.callback.handler.class", "Java-only"),
    _ignore("sasl.client.callback.handler.class", "Java-only"),
    # Java-only instrumentation
    _ignore("interceptor.classes", "Java-only; kmirror exposes its own metrics"),
    _ignore("metric.reporters", "Java-only; kmirror exposes its own metrics"),
    _ignore("metrics.num.samples", "Java-only"),
    _ignore("metrics.sample.window.ms", "Java-only"),
    _ignore("metrics.recording.level", "Java-only"),
    _ignore("auto.include.jmx.reporter", "Java-only"),
)

BY_KEY: dict[str, Rule] = {r.key: r for r in RULES}
# Pattern families that have no single key.
REFUSED_PREFIXES: tuple[tuple[str, str], ...] = (("zk.", _ZK_SETTING_FIX), ("zookeeper.", _ZK_SETTING_FIX))


def rule_for(key: str, role: str) -> Rule | None:
    rule = BY_KEY.get(key)
    if rule is not None:
        return rule
    for prefix, fix in REFUSED_PREFIXES:
        if key.startswith(prefix):
            return Rule(key, "refuse", fix)
    return None


def markdown() -> str:
    """The table as published in docs/config-translation.md."""
    lines = [
        "# Consumer and producer keys: Java and legacy MirrorMaker keys in kmirror",
        "",
        "Generated from `worker/src/kmirror/config/translation.py` by `kmirror config-keys --markdown`;"
        " do not edit by hand.",
        "",
        "Keys not listed here are given to librdkafka unchanged; a key librdkafka does not know is"
        " refused with the file and key named.",
        "",
        "| key | in | what kmirror does | librdkafka key | notes |",
        "|---|---|---|---|---|",
    ]
    verbs = {
        "rename": "translated",
        "ignore": "accepted, no effect",
        "refuse": "refused",
        "special": "translated (see notes)",
    }
    for r in sorted(RULES, key=lambda r: r.key):
        lines.append(
            f"| `{r.key}` | {r.scope} | {verbs[r.action]} | {f'`{r.target}`' if r.target else ''} "
            f"| {r.note} |"
        )
    lines.append("")
    lines.append("Keys starting with `zk.` or `zookeeper.` are refused: " + _ZK_FIX + ".")
    lines.append("")
    return "\n".join(lines)
