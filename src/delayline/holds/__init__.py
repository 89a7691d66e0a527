"""Where pending schedules wait: the hold seam, its pure rules and each hold.

- :mod:`delayline.holds.fold`: the rules, one pure function every hold uses.
- :mod:`delayline.holds.hold`: the :class:`~delayline.holds.hold.Hold` interface the
  pipeline calls, and :func:`~delayline.holds.hold.hold_for` to pick one by name.
- :mod:`delayline.holds.memory`: an in-memory hold (tests; not durable).
- :mod:`delayline.holds.spark_state`: the default hold, in Spark state.
"""
