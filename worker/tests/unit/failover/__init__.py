"""Unit tests of kmirror.failover (a package: test basenames may repeat across folders)."""
