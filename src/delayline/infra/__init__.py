"""Local infrastructure for development and tests: the jar cache and a local broker."""
