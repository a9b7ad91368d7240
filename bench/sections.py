"""docs/benchmarks.md is written by several benchmarks, each owning the text between its markers."""

from __future__ import annotations

from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace the text between the section's markers (or append the section); the rest is untouched."""
    begin, end = markers(name)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section.rstrip("\n") + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)
