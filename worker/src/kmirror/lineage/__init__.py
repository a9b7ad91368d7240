"""Where a copy comes from and what it is called: provenance headers and destination topic names (pure)."""
