"""Unit tests of kmirror.testing's pure helpers (a package: test basenames may repeat across folders)."""
