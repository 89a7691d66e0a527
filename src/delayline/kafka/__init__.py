"""Kafka helpers: client settings, reading, producing, topics."""
