"""The mirror runtime: plan -> runner (one process per stream) -> engine, topics, metrics."""
