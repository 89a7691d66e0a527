"""Firing: the transactional write of deliveries, tombstones, history and dead letters.

The writer both the fire stage and the committers use is
:mod:`~delayline.fire.transactional` (a batch written exactly once, refusals
dead-lettered), over :mod:`~delayline.fire.producer` (its producer's life) and
:mod:`~delayline.fire.write_attempt` (one attempt's records); what the cluster refuses is
judged in :mod:`~delayline.fire.refusals` on the facts of
:mod:`~delayline.fire.topic_catalog`, record sizes by :mod:`~delayline.fire.record_size`.
"""
