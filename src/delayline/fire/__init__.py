"""Firing: the transactional write of deliveries, tombstones, history and dead letters."""
