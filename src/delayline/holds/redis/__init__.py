"""The Redis hold: pending schedules in a Redis sorted set (see :mod:`.hold`).

- :mod:`.config`: its settings; :mod:`.codec`: a held version as bytes;
- :mod:`.scripts`: the key layout and the Lua scripts (each atomic in Redis);
- :mod:`.store`: what a Spark task and the driver do in Redis;
- :mod:`.hold`: the :class:`~delayline.holds.hold.Hold` the pipeline calls.
"""
