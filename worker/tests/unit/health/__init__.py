"""Unit tests of kmirror.health (a package: test basenames may repeat across folders)."""
