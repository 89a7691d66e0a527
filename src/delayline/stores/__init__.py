"""Where pending schedules wait: the hold seam, its pure rules and each hold.

- :mod:`delayline.stores.fold`: the rules, one pure function every hold uses.
- :mod:`delayline.stores.hold`: the :class:`~delayline.stores.hold.Hold` interface the
  pipeline calls, and :func:`~delayline.stores.hold.hold_for` to pick one by name.
- :mod:`delayline.stores.memory`: an in-memory hold (tests; not durable).
- :mod:`delayline.stores.spark_state`: the default hold, in Spark state.
"""
