"""Unit tests of kmirror.config (a package: test basenames may repeat across folders)."""
