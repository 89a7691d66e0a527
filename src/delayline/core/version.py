"""This release's version (``pyproject.toml`` says the same: a unit test holds them equal)."""

VERSION = "0.2.0.dev0"
