"""Unit tests of kmirror.mirror (a package: test basenames may repeat across folders)."""
