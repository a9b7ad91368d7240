"""Offset translation for consumer-group failover: sync points, the group sync thread, `kmirror failover`."""
