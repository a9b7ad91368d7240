"""kmirror.config.secrets: which keys hold secrets, and masking them."""

from __future__ import annotations

import pytest

from kmirror.config import MASK, is_secret, masked


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "sasl.oauthbearer.client.secret",
        "db_pw",
        "admin.pwd",
        "pw_admin",
        "sasl.oauthbearer.token",
        "my.token",
        "api_token",
        "X_TOKEN",
    ],
)
def test_secret_keys_are_masked(key):
    assert is_secret(key)
    assert masked({key: "hunter2", "client.id": "c"}) == {key: MASK, "client.id": "c"}


def test_plain_keys_are_not_secret():
    for key in ("bootstrap.servers", "sasl.username", "group.id", "ssl.ca.location", "pwm.mode", "cpw.x"):
        assert not is_secret(key)
