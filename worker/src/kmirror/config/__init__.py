"""The config pipeline: a consumer or producer properties file -> the settings librdkafka gets.

properties (parse, Java's rules) -> translate (translation.RULES, JAAS, key stores) -> validate
(safety: required and default settings, refusals; then librdkafka's own offline check). `load` runs
the whole pipeline for one file. The facts each step applies live in one module each: translation
(key table), safety (data-loss-safe settings), secrets (which keys are secret), filters (topic filters).
"""

from kmirror.config.client import ClientConfig, admin_settings, client_conf
from kmirror.config.load import connection_settings, load_client_config
from kmirror.config.secrets import MASK, is_secret, masked
from kmirror.config.translate import translate
from kmirror.config.validate import finish, validate_with_librdkafka

__all__ = [
    "MASK",
    "ClientConfig",
    "admin_settings",
    "client_conf",
    "connection_settings",
    "finish",
    "is_secret",
    "load_client_config",
    "masked",
    "translate",
    "validate_with_librdkafka",
]
