"""kmirror.config.converters: broker lists as Java's clients take them, addresses without a port refused."""

from __future__ import annotations

import pytest

from kmirror.config.converters import check_brokers
from kmirror.errors import ConfigError


@pytest.mark.parametrize(
    "value",
    [
        "kafka1:9092",
        "kafka1:9092,kafka2:9093",
        " kafka1:9092 , ,kafka2:9093,",
        "10.0.0.1:6667",
        "[::1]:9092",
        "[fe80::1%eth0]:9092",
        "SSL://kafka1:9093",
        "my_host.example.com:1",
    ],
)
def test_broker_lists_java_accepts(value):
    check_brokers(value, "f.properties")


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("kafka-source-server3-6667", "did you mean kafka-source-server3:6667?"),
        ("kafka1", None),
        ("kafka1:", None),
        ("kafka1:0", None),
        ("kafka1:65536", None),
        ("kafka1:9092,kafka2", None),
        ("::1:9092", None),
    ],
)
def test_broker_addresses_without_a_port_refused(value, hint):
    """Java's clients refuse an address without a port ("Invalid url in bootstrap.servers"); librdkafka
    would quietly use 9092, so a typo such as server3-6667 for server3:6667 would go unnoticed."""
    with pytest.raises(ConfigError) as info:
        check_brokers(value, "f.properties")
    line = info.value.render()
    assert line.startswith("f.properties: bootstrap.servers: broker address ")
    assert "give every broker as HOST:PORT" in line
    assert (hint in line) if hint else ("did you mean" not in line)
