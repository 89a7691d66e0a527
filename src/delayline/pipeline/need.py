"""When the pipeline needs a micro-batch: the waker's rules, pure (a clock passed in).

A micro-batch costs 0.5-0.7 s of CPU here whatever it carries, and with a lead it no
longer decides when a delivery is made (the committer commits at the due time); it only
has to hand each schedule over before its due time. So the pipeline's source is gated
(``dev.delayline.gate.Gate``, in the hold jar) and the waker opens it only when the work
needs a batch:

* **A held timer.** A schedule may be raised anywhere in its lead, so the waker wakes
  for a timer set at ``raise`` at ``raise + max(0, lead - margin)``: ``margin`` before
  the due time, with every other timer raised by then riding along. When many ride
  along (a burst due together), it wakes earlier by what raising them costs, so the
  batch that raises them ends ``margin`` before the first due time; as early as the
  first raise time at most (:func:`timers_wake_ms`).
* **A new schedule.** One the committer's watch read but the pipeline has not must be
  read (and, if its lead has begun, raised) ``margin`` before its due time, and earlier
  by what reading every record that arrived with it costs the batch
  (:meth:`Margin.read_us`): a fresh JVM's first batch of 3,600 schedules took 4.5 s here.
* **Anything new, eventually.** A cancel, an invalid record or a far schedule waits at
  most ``wait_ms`` (:attr:`Need.wait_ms`), and ``records`` unread records call for a batch
  at once: under load batches run back to back, as without the gate.
* **delayline's own records never do**: its tombstones, transaction markers and wake
  records are read by whatever batch comes next.

``margin`` follows the batches: the longest recent time from a wake to the end of the
batch that served it, with room to spare (:class:`Margin`), and never less than
:data:`MIN_MARGIN_MS`; so does the cost of raising a schedule, from the batches that
raised many, and the cost of reading an input record, from the batches that read many
(the whole batch's time over what it read: its fixed cost counts twice, so the wake
comes early rather than late). A batch that takes longer than it did raises later, but
within the lead by at least the spare; one that takes longer than the whole margin
hands over late (as a batch longer than the lead always did).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from delayline.committer.arrivals import Arrived
from delayline.core.clock import GRANULARITY_MS

MIN_MARGIN_MS = 1_500
"""The least time a wake comes before the due time it serves: a batch at a trickle
took 0.5-1.2 s here from its wake to its hand-over."""
MARGIN_SPARE = 1.5
"""The margin is this many times the longest recent time from a wake to the end of the
batch that served it (the wait for Spark's next trigger included), plus
:data:`MARGIN_PAD_MS`."""
MARGIN_PAD_MS = 250
MARGIN_DECAY = 0.8
"""Each batch, the longest time the margin remembers shrinks by this factor unless the
batch took as long: a slow batch (a cold JVM's first) is forgotten within a few."""
DEFAULT_RAISE_US = 100
"""What raising one schedule adds to a batch until a batch that raised many tells: a
batch that handed 50,000 over took 1.6-3.4 s here (33-68 us a schedule), a fresh JVM's
more."""
BURST_TIMERS = 2_000
"""Timers that make a burst: the waker wakes early only for at least this many due
together (fewer are woken as before), and only a batch that raised this many tells what
a raise costs (in a smaller one the batch's fixed cost dominates)."""
DEFAULT_READ_US = 1_000
"""What reading one input record adds to a batch until a batch that read many tells: a
fresh JVM's first batch of 3,598 took 4.5 s here (1.25 ms a record), a warm one's of
4,374 2.1 s (0.47 ms). Below the cold figure: what it buys is a wake before many have
arrived, so the first batch carries fewer (one of 1,602 took 4.2 s)."""
READ_RECORDS = 2_000
"""Only a batch that read at least this many input records tells what a record costs (in
a smaller one the batch's fixed cost dominates)."""
DEFAULT_WAIT_MS = 10_000
"""See :attr:`Need.wait_ms`."""
DEFAULT_RECORDS = 5_000
"""See :attr:`Need.records`."""


@dataclass(frozen=True, slots=True)
class Need:
    """The waker's settings.

    Attributes:
        lead_ms: The pipeline's lead.
        wait_ms: The longest a new input record waits for a batch.
        records: Unread input records that call for a batch at once.
    """

    lead_ms: int
    wait_ms: int = DEFAULT_WAIT_MS
    records: int = DEFAULT_RECORDS


class Margin:
    """How long before a due time a batch must be woken: from recent batches. Not
    thread-safe."""

    def __init__(self) -> None:
        self._longest_ms = 0.0
        self._raise_us: float | None = None
        self._read_us: float | None = None

    def observe(self, wake_to_done_ms: int, raised: int = 0, read: int = 0) -> None:
        """A batch ended this long after the first wake it served, having raised
        ``raised`` schedules and read ``read`` input records."""
        self._longest_ms = max(float(wake_to_done_ms), self._longest_ms * MARGIN_DECAY)
        if raised >= BURST_TIMERS:
            self._raise_us = _learnt(wake_to_done_ms * 1000 / raised, self._raise_us)
        elif read >= READ_RECORDS:  # a burst's time is its raises'
            self._read_us = _learnt(wake_to_done_ms * 1000 / read, self._read_us)
        elif self._read_us is not None:  # a cold batch's cost is forgotten in small ones too
            self._read_us *= MARGIN_DECAY

    def ms(self) -> int:
        """The margin now."""
        return max(MIN_MARGIN_MS, int(self._longest_ms * MARGIN_SPARE) + MARGIN_PAD_MS)

    def raise_us(self) -> float:
        """What raising one more schedule adds to a batch, with room to spare."""
        return _spared(self._raise_us, DEFAULT_RAISE_US)

    def read_us(self) -> float:
        """What reading one more input record adds to a batch, with room to spare (the
        whole batch's time over what it read: its fixed cost counts too)."""
        return _spared(self._read_us, DEFAULT_READ_US)


def _spared(learnt: float | None, default: float) -> float:
    """A learnt cost with room to spare, or ``default`` before one is learnt."""
    return default if learnt is None else learnt * MARGIN_SPARE


def _learnt(cost: float, last: float | None) -> float:
    """A cost just seen, against the one remembered: the larger, the old one decaying."""
    return cost if last is None else max(cost, last * MARGIN_DECAY)


def timer_wake_ms(raise_ms: int, lead_ms: int, margin_ms: int) -> int:
    """When to wake for a timer set at ``raise_ms`` (its due time less ``lead_ms``):
    ``margin_ms`` before the due time, never before the raise time."""
    return raise_ms + max(0, lead_ms - margin_ms)


def timers_wake_ms(
    slots: Sequence[tuple[int, int]], lead_ms: int, margin_ms: int, raise_us: float
) -> int | None:
    """When to wake for the earliest of ``slots`` (wake slots of raise times, ascending,
    each with how many timers it holds; those up to :func:`timer_wake_ms` of the first
    are enough): the latest time at which a batch raising every timer due by then still
    ends ``margin_ms`` before the first due time, ``raise_us`` a timer. That is
    :func:`timer_wake_ms` for fewer than :data:`BURST_TIMERS` timers; for a burst,
    earlier; never before the first slot (nothing is raised earlier). ``None`` without
    slots."""
    if not slots:
        return None
    first = slots[0][0]
    latest = timer_wake_ms(first, lead_ms, margin_ms)
    if sum(count for _, count in slots) < BURST_TIMERS:
        return latest
    best = first
    raised = 0
    for i, (slot, count) in enumerate(slots):
        if slot > latest:
            break
        raised += count
        # Woken from this slot until a slot before the next (whose timers are raised
        # from a slot before it on), a batch raises ``raised`` timers.
        end = latest if i + 1 == len(slots) else min(latest, slots[i + 1][0] - GRANULARITY_MS)
        fits = latest - int(raised * raise_us / 1000)
        if fits >= slot:
            best = max(best, min(end, fits))
    return best


def arrivals_wake_ms(arrived: Arrived, need: Need, margin_ms: int, *, read_us: float) -> int:
    """When what ``arrived`` needs a batch (see the module's rules), reading each record
    ``read_us`` (:meth:`Margin.read_us`)."""
    if arrived.count >= need.records:
        return arrived.first_read_ms
    at = arrived.first_read_ms + need.wait_ms
    if arrived.earliest_due_ms is not None:
        reading_ms = int(arrived.count * read_us / 1000)
        at = min(at, arrived.earliest_due_ms - margin_ms - reading_ms)
    return at
