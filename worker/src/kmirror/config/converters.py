"""Value converters of the translation table (kmirror.config.translation): Java client values ->
librdkafka values. Each raises ConfigError naming the key on a value it cannot use."""

from __future__ import annotations

import re

from kmirror.errors import ConfigError

# HOST:PORT, HOST a name, an IPv4 address or a bracketed IPv6 address; an optional PROTOCOL:// before it
# (librdkafka and Java's clients both accept one).
_BROKER = re.compile(r"^(?:[A-Za-z_]+://)?(?:\[[0-9A-Za-z:.%_-]+\]|[0-9A-Za-z_.%-]+):(\d{1,5})$")
_DASHED_PORT = re.compile(r"^(.*[0-9A-Za-z])-(\d{2,5})$")


def check_brokers(value: str, origin: str, key: str = "bootstrap.servers") -> None:
    """Every broker address must name its port, as Java's clients require (``Invalid url in
    bootstrap.servers``); librdkafka would quietly take 9092 for a missing one (``server3-6667``, a typo
    for ``server3:6667``, would become ``server3-6667:9092``)."""
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _BROKER.match(item)
        if m and 0 < int(m.group(1)) < 65536:
            continue
        dashed = _DASHED_PORT.match(item)
        hint = f" (did you mean {dashed.group(1)}:{dashed.group(2)}?)" if dashed else ""
        raise ConfigError(
            f"broker address {item!r} is not HOST:PORT{hint}",
            origin=origin,
            key=key,
            fix="give every broker as HOST:PORT, e.g. kafka1:9092 (or [::1]:9092 for IPv6)",
        )


def broker_list(value: str, origin: str) -> str:
    """0.7's ``broker.list`` is ``id:host:port,...``; 0.8's ``metadata.broker.list`` is ``host:port,...``."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) == 3 and parts[0].isdigit():
            parts = parts[1:]
        out.append(":".join(parts))
    return ",".join(out)


_CODECS = {
    "0": "none",
    "nocompressioncodec": "none",
    "none": "none",
    "uncompressed": "none",
    "1": "gzip",
    "gzipcompressioncodec": "gzip",
    "gzip": "gzip",
    "defaultcompressioncodec": "gzip",
    "2": "snappy",
    "snappycompressioncodec": "snappy",
    "snappy": "snappy",
    "3": "lz4",
    "lz4compressioncodec": "lz4",
    "lz4": "lz4",
    "4": "zstd",
    "zstdcompressioncodec": "zstd",
    "zstd": "zstd",
}


def codec(value: str, origin: str) -> str:
    try:
        return _CODECS[value.strip().lower()]
    except KeyError:
        raise ConfigError(
            f"unknown compression codec {value!r}",
            origin=origin,
            key="compression.codec",
            fix="use 0 (none), 1 (gzip), 2 (snappy), 3 (lz4), 4 (zstd) or set compression.type",
        ) from None


def offset_reset(value: str, origin: str) -> str:
    v = value.strip().lower()
    return {"smallest": "earliest", "largest": "latest"}.get(v, v)


def kbytes(value: str, origin: str) -> str:
    try:
        return str(max(1, -(-int(value.strip()) // 1024)))
    except ValueError:
        raise ConfigError(
            f"not a number of bytes: {value!r}",
            origin=origin,
            key="buffer.memory",
            fix="give a whole number of bytes, e.g. buffer.memory=33554432",
        ) from None


_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}


def assignors(value: str, origin: str) -> str:
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            out.append(_ASSIGNORS[item.lower()])
        except KeyError:
            raise ConfigError(
                f"assignor {item!r} has no librdkafka equivalent",
                origin=origin,
                key="partition.assignment.strategy",
                fix="use RangeAssignor, RoundRobinAssignor or CooperativeStickyAssignor",
            ) from None
    return ",".join(out)


def endpoint_identification(value: str, origin: str) -> str:
    return "none" if value.strip() == "" else value.strip().lower()


def acks(value: str, origin: str) -> str:
    return "all" if value.strip() == "-1" else value.strip()
