"""The bucket hold: pending schedules in Kafka time-bucket topics (see :mod:`.hold`).

- :mod:`.config`: its settings and the bucket layout; :mod:`.copy`: a copy's bytes;
- :mod:`.source`: the bucket topics as a Spark source of what is ready;
- :mod:`.route`: what the fire stage writes for it (copies, rewrites);
- :mod:`.topics`: creating and checking the bucket topics;
- :mod:`.hold`: the :class:`~delayline.holds.hold.Hold` the pipeline calls.
"""
