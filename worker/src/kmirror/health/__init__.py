"""Lag and health: `kmirror lag`, its rules and the per-partition lag model."""
