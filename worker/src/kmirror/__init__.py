"""kmirror: a drop-in, no-data-loss replacement for Kafka's MirrorMaker."""

__version__ = "0.1.0"
