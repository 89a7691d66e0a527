"""The oscillator: one record per Unix second on a topic (the durable Kafka timers design).

:mod:`.ticks` decides which seconds to write; :mod:`.service` writes them.
"""
