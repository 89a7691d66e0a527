"""The Redis hold's state operations: what one Spark task, and the driver, do in Redis.

One task of one micro-batch is one atomic script (:data:`.scripts.TASK`): it applies
the task's records (folded in Python by :func:`delayline.holds.fold.fold`, one
definition of the rules for every hold), claims the due schedules, and stores what it
decided as the task record. A replay of the task (a retried task, or the batch again
after a crash) reads the record back and emits the same events, whatever changed in
Redis since: so the fire stage's markers make the whole batch exactly once.

Versions are written only if the version they replace is still the one read (the
first bytes of the value, :data:`.codec.TOKEN_BYTES`); otherwise the task reads and
folds again. So two tasks (or two pipelines) touching one id apply its records one
after the other, never one over the other.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from delayline.contract import ConsumedRecord
from delayline.contract.contracts import InputParser
from delayline.contract.kinds import HoldEvent
from delayline.core.model import Schedule
from delayline.errors import DelaylineError, RedisUnavailableError
from delayline.holds.fold import fold, timer_event
from delayline.holds.redis import scripts
from delayline.holds.redis.codec import decode_schedule, encode_schedule, version_token
from delayline.holds.redis.config import RedisHoldConfig

if TYPE_CHECKING:
    import pyarrow as pa
    import redis

log = logging.getLogger(__name__)

MAX_CONFLICTS = 20
"""Fold-and-write attempts of one task before it fails (each conflict means another
task changed one of its ids in between: it makes progress, so this is never reached
in practice)."""


class RedisHoldError(DelaylineError):
    """Redis refused a command (out of memory, a read-only replica...), or a task record
    does not match its replay; the batch fails and the pipeline stops with the reason."""


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What one task decided.

    Attributes:
        now_ms: The batch time the decision was made at (a replay keeps the first).
        events: The events, :data:`delayline.contract.events.EVENT_SCHEMA` as Arrow.
        replay: The task record existed: these are the events of an earlier attempt.
        lost: Due members whose value had expired (past the grace): never delivered.
    """

    now_ms: int
    events: pa.Table
    replay: bool
    lost: int = 0


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A task record read back (by a replay, or by a pipeline taking it over)."""

    key: str
    run: str
    owner: str
    batch_id: int
    partition: int
    now_ms: int
    state: str
    input: str
    events: bytes
    claimed: tuple[bytes, ...]


def connect(config: RedisHoldConfig) -> redis.Redis:
    """A client that retries a lost connection (with backoff) for ``timeout_ms``."""
    import redis as r  # noqa: PLC0415 - executors and the Redis hold only
    from redis.backoff import ExponentialBackoff  # noqa: PLC0415
    from redis.retry import Retry  # noqa: PLC0415

    # Backoff 50 ms doubling to 1 s: about timeout_ms in all.
    retries = max(1, config.timeout_ms // 1000 + 3)
    return r.Redis.from_url(
        config.url,
        socket_timeout=config.timeout_ms / 1000,
        socket_connect_timeout=5,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        retry_on_error=[r.ConnectionError, r.TimeoutError, r.BusyLoadingError],
        health_check_interval=0,
    )


class RedisStore:
    """Pending schedules in Redis under one prefix.

    Args:
        config: Where Redis is and the hold's settings.
        parse: The input parser of the pipeline's topics.
        lead_ms: A schedule is claimed this long before its due time.
        max_lateness_ms: A claimed schedule later than this is dead-lettered (expired).
        client: A client to use instead of one from :func:`connect`.
    """

    def __init__(
        self,
        config: RedisHoldConfig,
        parse: InputParser,
        lead_ms: int = 0,
        max_lateness_ms: int | None = None,
        client: redis.Redis | None = None,
    ) -> None:
        self.config = config
        self.parse = parse
        self.lead_ms = lead_ms
        self.max_lateness_ms = max_lateness_ms
        self.keys = scripts.Keys(config.prefix)
        self.client = client if client is not None else connect(config)
        self._task = self.client.register_script(scripts.TASK)
        self._release = self.client.register_script(scripts.RELEASE)
        self._seize = self.client.register_script(scripts.SEIZE)
        self._finish = self.client.register_script(scripts.FINISH)
        self._own = self.client.register_script(scripts.OWN)

    def run_task(
        self,
        run: str,
        owner: str,
        batch_id: int,
        partition: int,
        records: Sequence[ConsumedRecord],
        now_ms: int,
    ) -> TaskResult:
        """Apply one task's records, claim what is due, record the decision; or, for a
        replay, return the decision recorded before.

        ``owner`` is kept in the record as given: what another pipeline needs to finish
        the task as its owner (:mod:`.hold`).

        Raises:
            RedisUnavailableError: Redis did not answer within the timeout.
            RedisHoldError: a replay got other input than the attempt it replays.
        """
        from delayline.holds.redis import events as ev  # noqa: PLC0415 - pyarrow

        key = self.keys.task(run, batch_id, partition)
        groups = self._groups(records)
        seen = fingerprint(records)
        for _ in range(MAX_CONFLICTS):
            held = self._read(list(groups))
            writes: list[Any] = []
            decided: list[HoldEvent] = []
            for member, batch in groups.items():
                before = held[member]
                prior = None if before is None else decode_schedule(before)
                folded = fold(prior, batch, now_ms, self.max_lateness_ms, self.lead_ms, self.parse)
                decided.extend(folded.events)
                # Unchanged versions are checked too: the decision relied on them.
                change = folded.held is not prior
                writes.extend(self._write(member, before, folded.held, now_ms, change=change))
            blob = ev.to_ipc(decided)
            args = [
                now_ms,
                now_ms + self.lead_ms,
                self.config.claim_limit,
                now_ms + self.config.lease_ms,
                blob,
                run,
                owner,
                batch_id,
                partition,
                self.keys.held,
                len(writes) // 5,
                seen,
                *writes,
            ]
            keys = [key, self.keys.due, self.keys.tasks, self.keys.run_index(run)]
            reply = self._call(self._task, keys, args)
            tag = reply[0]
            if tag == b"exists":
                record = self.read_task(key)
                if record.input != seen:
                    # Its events belong to other records: replaying them would fire
                    # some twice and never apply others. Stop rather than guess.
                    raise RedisHoldError(
                        f"task record {key} was decided on input {record.input!r}, but its "
                        f"replay got {seen!r}: Spark replayed batch {batch_id} with its "
                        "partitions in another order"
                    )
                events = self.record_events(record, self.max_lateness_ms)
                return TaskResult(record.now_ms, events, replay=True)
            if tag == b"conflict":
                log.debug("task %s: %s changed meanwhile; folding again", key, reply[1])
                continue
            claimed = [self._claimed(v, now_ms) for v in reply[2:]]
            lost = int(reply[1])
            if lost:
                log.warning(
                    "%d due schedule(s) had expired in Redis (longer than the grace "
                    "%d ms past due): not delivered",
                    lost,
                    self.config.grace_ms,
                )
            return TaskResult(now_ms, ev.to_table(decided + claimed), replay=False, lost=lost)
        raise RedisUnavailableError(f"task {key}: {MAX_CONFLICTS} write conflicts in a row")

    def ping(self) -> None:
        """Check that Redis answers.

        Raises:
            RedisUnavailableError: it did not, within the timeout.
        """
        self._call_client(lambda c: c.ping())

    def read_task(self, key: str) -> TaskRecord:
        """The task record at ``key`` (it must exist)."""
        raw = self._call_client(lambda c: c.hgetall(key))
        return _record(key, raw)

    def record_events(self, record: TaskRecord, max_lateness_ms: int | None) -> pa.Table:
        """The events a task record stands for (none once another pipeline finished it).

        Args:
            record: The record.
            max_lateness_ms: The maximum lateness that decides between RAISE and expired:
                the owner's (when another pipeline finishes the record, its own).
        """
        from delayline.holds.redis import events as ev  # noqa: PLC0415 - pyarrow

        if record.state != "open":
            return ev.to_table([])
        claimed = [
            timer_event(decode_schedule(v), record.now_ms, max_lateness_ms) for v in record.claimed
        ]
        return ev.concat(ev.from_ipc(record.events), ev.to_table(claimed))

    def release(self, run: str, below_batch: int) -> int:
        """Delete ``run``'s task records of batches before ``below_batch`` (Spark has
        committed those: they are never replayed); how many."""
        keys = [self.keys.run_index(run), self.keys.tasks]
        return int(self._call(self._release, keys, [below_batch]))

    def task_run(self, key: str) -> str | None:
        """The run that owns the task record at ``key`` (``None``: gone)."""
        raw = self._call_client(lambda c: c.hget(key, "run"))
        return None if raw is None else bytes(raw).decode()

    def claimers(self, run: str, wanted: int) -> int:
        """How many tasks ``run`` splits each batch into (each claims due schedules):
        ``wanted`` on its first batch, the same afterwards (a replay must put each record
        in the same task)."""
        key = f"{self.keys.tag}:claimers:{run}"
        self._call_client(lambda c: c.set(key, wanted, nx=True))
        return int(self._call_client(lambda c: c.get(key)))

    def expired_tasks(self, now_ms: int, limit: int = 20) -> list[str]:
        """Open task records whose lease ended by ``now_ms``, oldest first."""
        found = self._call_client(
            lambda c: c.zrangebyscore(self.keys.tasks, "-inf", now_ms, start=0, num=limit)
        )
        return [k.decode() for k in found]

    def seize(self, key: str, now_ms: int) -> TaskRecord | None:
        """Take over an open task record whose lease ended (renewing the lease)."""
        raw = self._call(
            self._seize, [key, self.keys.tasks], [now_ms, now_ms + self.config.lease_ms]
        )
        if not raw:
            return None
        return _record(key, dict(zip(raw[::2], raw[1::2], strict=True)))

    def finish(self, key: str) -> None:
        """Mark a seized task record done: its owner's replay writes nothing."""
        self._call(self._finish, [key, self.keys.tasks], [])

    def heartbeat(self, run: str, now_ms: int) -> None:
        """Say ``run`` is alive (its task records are not taken over)."""
        self._call_client(lambda c: c.hset(self.keys.runs, run, now_ms))

    def last_seen(self) -> dict[str, int]:
        """Every run's last heartbeat (ms)."""
        raw = self._call_client(lambda c: c.hgetall(self.keys.runs))
        return {k.decode(): int(v) for k, v in raw.items()}

    def forget_run(self, run: str) -> None:
        """A clean stop: ``run`` no longer reads its topics."""
        self._call_client(lambda c: c.hdel(self.keys.runs, run))

    def own(self, run: str, topics: Iterable[str], now_ms: int) -> tuple[str, str, int] | None:
        """Register ``run`` as the reader of ``topics``; ``(topic, other run, its last
        heartbeat)`` when another live run reads one of them (nothing is registered)."""
        keys = [self.keys.owners, self.keys.runs]
        reply = self._call(self._own, keys, [run, now_ms, self.config.lease_ms, *topics])
        if not reply:
            return None
        return reply[0].decode(), reply[1].decode(), int(reply[2])

    def next_release_ms(self) -> int | None:
        """The earliest due time pending (claimed or not yet), if any."""
        first = self._call_client(lambda c: c.zrange(self.keys.due, 0, 0, withscores=True))
        return int(first[0][1]) if first else None

    def next_lease_end_ms(self, other_than: str | None = None, scan: int = 100) -> int | None:
        """When the earliest open task record's lease ends, if any; with ``other_than``,
        of a record of another run than that one, among the ``scan`` earliest."""
        first = self._call_client(lambda c: c.zrange(self.keys.tasks, 0, scan - 1, withscores=True))
        own = None if other_than is None else self.keys.task(other_than, 0, 0).rsplit(":", 2)[0]
        for key, score in first:
            if own is None or not bytes(key).decode().startswith(own + ":"):
                return int(score)
        return None

    def pending(self) -> int:
        """How many schedules wait (not claimed yet)."""
        return int(self._call_client(lambda c: c.zcard(self.keys.due)))

    def due_times(self, limit: int = 100_000) -> list[int]:
        """The earliest ``limit`` due times pending."""
        pairs = self._call_client(lambda c: c.zrange(self.keys.due, 0, limit - 1, withscores=True))
        return [int(score) for _member, score in pairs]

    def held(self, topic: str, group_key: bytes) -> Schedule | None:
        """The version pending for (``topic``, ``group_key``), if any."""
        raw = self._call_client(
            lambda c: c.get(self.keys.held.encode() + _member(topic, group_key))
        )
        return None if raw is None else decode_schedule(raw)

    def _groups(self, records: Sequence[ConsumedRecord]) -> dict[bytes, list[ConsumedRecord]]:
        groups: dict[bytes, list[ConsumedRecord]] = defaultdict(list)
        for record in records:
            groups[_member(record.topic, self.parse.group_key(record))].append(record)
        return groups

    def _read(self, members: list[bytes]) -> dict[bytes, bytes | None]:
        if not members:
            return {}
        prefix = self.keys.held.encode()
        values = self._call_client(lambda c: c.mget([prefix + m for m in members]))
        return dict(zip(members, values, strict=True))

    def _write(
        self,
        member: bytes,
        before: bytes | None,
        after: Schedule | None,
        now_ms: int,
        *,
        change: bool,
    ) -> list[Any]:
        if not change:
            return [member, version_token(before), scripts.UNCHANGED, 0, 0]
        if after is None:
            return [member, version_token(before), b"", 0, 0]
        # Relative to the batch time (Redis's own clock runs the expiry): the same in
        # production, where the batch time is the wall clock, and right under a test clock.
        ttl_ms = max(1, after.due_ms + self.config.grace_ms - now_ms)
        return [member, version_token(before), encode_schedule(after), after.due_ms, ttl_ms]

    def _claimed(self, value: bytes, now_ms: int) -> HoldEvent:
        return timer_event(decode_schedule(value), now_ms, self.max_lateness_ms)

    def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        return self._call_client(lambda _c: script(keys=keys, args=args))

    def _call_client(self, call: Any) -> Any:
        import redis as r  # noqa: PLC0415

        try:
            return call(self.client)
        except (r.ConnectionError, r.TimeoutError) as exc:
            raise RedisUnavailableError(
                f"Redis at {self.config.safe_url} did not answer within "
                f"{self.config.timeout_ms} ms: {exc}"
            ) from exc
        except r.RedisError as exc:  # OOM under noeviction, READONLY replica, BUSY...
            raise RedisHoldError(f"Redis at {self.config.safe_url} refused: {exc}") from exc


def fingerprint(records: Sequence[ConsumedRecord]) -> str:
    """What a task's input was: per source topic and partition, its first and last
    offset and count (a replay must get the same)."""
    spans: dict[tuple[str, int], list[int]] = {}
    for record in records:
        span = spans.setdefault((record.topic, record.partition), [record.offset, record.offset, 0])
        span[0] = min(span[0], record.offset)
        span[1] = max(span[1], record.offset)
        span[2] += 1
    return ",".join(f"{t}/{p}@{a}-{b}x{n}" for (t, p), (a, b, n) in sorted(spans.items()))


def _member(topic: str, group_key: bytes) -> bytes:
    # A topic name has no '/': the first one ends it.
    return topic.encode() + b"/" + group_key


def _record(key: str, raw: dict[bytes, bytes]) -> TaskRecord:
    count = int(raw.get(b"n", b"0"))
    return TaskRecord(
        key=key,
        run=raw.get(b"run", b"").decode(),
        owner=raw.get(b"owner", b"").decode(),
        batch_id=int(raw.get(b"batch", b"-1")),
        partition=int(raw.get(b"part", b"0")),
        now_ms=int(raw.get(b"now", b"0")),
        state=raw.get(b"state", b"").decode(),
        input=raw.get(b"in", b"").decode(),
        events=raw.get(b"ev", b""),
        claimed=tuple(raw[f"c{i}".encode()] for i in range(1, count + 1)),
    )
