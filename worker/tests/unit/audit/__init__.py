"""Unit tests of kmirror.audit (a package: test basenames may repeat across folders)."""
