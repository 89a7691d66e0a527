"""Wire formats in and out of delayline.

The schedules-topic header contract (``kafka-message-scheduler`` compatible) is
:mod:`delayline.contract.records` with names in :mod:`delayline.contract.headers`.
"""

from delayline.contract.records import (
    ConsumedRecord,
    OutgoingRecord,
    build_schedule,
    parse_record,
    render_cancel,
    render_dead_letter,
    render_delivery,
    render_history,
    render_rewrite,
    render_schedule,
    render_tombstone,
)

__all__ = [
    "ConsumedRecord",
    "OutgoingRecord",
    "build_schedule",
    "parse_record",
    "render_cancel",
    "render_dead_letter",
    "render_delivery",
    "render_history",
    "render_rewrite",
    "render_schedule",
    "render_tombstone",
]
