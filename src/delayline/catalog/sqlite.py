"""The default catalog store: one SQLite file, WAL mode, indexed for each sort."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from delayline.catalog.events import AddDeadLetter, Change, Remove, Upsert
from delayline.catalog.model import (
    MAX_PAGE,
    DeadLetter,
    Page,
    Pending,
    PendingQuery,
    Stats,
    Version,
)
from delayline.catalog.sql import decode_cursor, encode_cursor, filters, select
from delayline.catalog.store import CatalogStore, Position
from delayline.contract.codec import decode_headers, encode_headers
from delayline.contract.formats import CATALOG
from delayline.contract.pacing import WindowError, window_of
from delayline.contract.recurring import describe_recurrence, group_of, paused_due_ms
from delayline.core.model import Headers, SourceRef
from delayline.core.versions import supersedes
from delayline.errors import CatalogError, ConfigError

log = logging.getLogger(__name__)

SCHEMA_VERSION = CATALOG.current
"""2: groups, recurrences and pauses of pending schedules; 3: their delivery windows. A
catalog of an older version is dropped and rebuilt from the topics (it holds nothing
else)."""
POOL_SIZE = 8
"""Idle connections kept; more are opened under load and closed afterwards."""
MAX_VERSIONS = 1000
"""Versions :meth:`SqliteCatalog.get` returns at most (the newest)."""
LATENESS_BUCKETS_MS = (100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    id TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
    offset INTEGER NOT NULL, due_ms INTEGER NOT NULL, target_topic TEXT NOT NULL,
    target_key BLOB, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
    grp TEXT, recurrence TEXT, paused_due_ms INTEGER, window_ms INTEGER,
    PRIMARY KEY (id, topic)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pending_group ON pending (grp, due_ms, id, topic);
CREATE INDEX IF NOT EXISTS pending_due ON pending (due_ms, id, topic);
CREATE INDEX IF NOT EXISTS pending_created ON pending (created_ms, id, topic);
CREATE INDEX IF NOT EXISTS pending_target ON pending (target_topic, due_ms, id, topic);
CREATE TABLE IF NOT EXISTS versions (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, topic TEXT NOT NULL,
    partition INTEGER NOT NULL, offset INTEGER NOT NULL, kind TEXT NOT NULL,
    at_ms INTEGER NOT NULL, due_ms INTEGER, target_topic TEXT, lateness_ms INTEGER,
    reason TEXT, payload BLOB, headers BLOB
);
CREATE INDEX IF NOT EXISTS versions_id ON versions (id, topic, offset);
CREATE INDEX IF NOT EXISTS versions_kind_at ON versions (kind, at_ms);
CREATE TABLE IF NOT EXISTS dead_letters (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    at_ms INTEGER NOT NULL, reason TEXT NOT NULL, source TEXT NOT NULL,
    schedule_id TEXT, key BLOB, value BLOB, headers BLOB,
    PRIMARY KEY (topic, partition, offset)
);
CREATE INDEX IF NOT EXISTS dead_letters_at ON dead_letters (at_ms, topic, partition, offset);
CREATE TABLE IF NOT EXISTS positions (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
"""

_PENDING_COLUMNS = (
    "id, topic, partition, offset, due_ms, target_topic, target_key, created_ms, updated_ms, "
    "grp, recurrence, paused_due_ms, window_ms"
)
_DEAD_LETTER_COLUMNS = (
    "topic, partition, offset, at_ms, reason, source, schedule_id, key, value, headers"
)
_SORT_COLUMNS = {"due": ("due_ms", "id", "topic"), "created": ("created_ms", "id", "topic")}


class SqliteCatalog(CatalogStore):
    """A :class:`CatalogStore` in one SQLite file.

    Connections come from a small pool (WAL lets readers run beside the writer); a
    thread holds one only for the duration of a call.

    Args:
        path: The database file; created with its directory when missing.

    Raises:
        CatalogError: the file holds a catalog of another schema version.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        with self._connection() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if 0 < version < SCHEMA_VERSION:
                log.warning(
                    "catalog %s has schema version %d, this delayline uses %d: rebuilding it "
                    "from the topics",
                    path,
                    version,
                    SCHEMA_VERSION,
                )
                for table in ("pending", "versions", "dead_letters", "positions"):
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            elif version > SCHEMA_VERSION:  # a newer release's (deleting it rebuilds it)
                CATALOG.check(version, f"catalog {path} (or delete it: it is rebuilt)")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=10000")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            with self._lock:
                keep = not self._closed and len(self._idle) < POOL_SIZE
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    @contextmanager
    def _transaction(self, mode: str = "") -> Iterator[sqlite3.Connection]:
        """One transaction: ``IMMEDIATE`` for writes, deferred (a snapshot) for reads."""
        with self._connection() as conn:
            conn.execute(f"BEGIN {mode}")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def apply(self, changes: Sequence[Change], positions: Mapping[Position, int]) -> None:
        with self._transaction("IMMEDIATE") as conn:
            for change in changes:
                if isinstance(change, Upsert):
                    _upsert(conn, change)
                elif isinstance(change, Remove):
                    _remove(conn, change)
                elif isinstance(change, AddDeadLetter):
                    _add_dead_letter(conn, change.entry)
                else:
                    raise CatalogError(f"not a catalog change: {type(change).__name__}")
            conn.executemany(
                "INSERT INTO positions VALUES (?, ?, ?) ON CONFLICT (topic, partition) "
                "DO UPDATE SET next_offset = excluded.next_offset",
                [(topic, part, offset) for (topic, part), offset in positions.items()],
            )

    def positions(self) -> dict[Position, int]:
        with self._connection() as conn:
            rows = conn.execute("SELECT topic, partition, next_offset FROM positions").fetchall()
        return {(topic, part): offset for topic, part, offset in rows}

    def pending(self, query: PendingQuery) -> Page[Pending]:
        if not 1 <= query.limit <= MAX_PAGE:
            raise ConfigError(f"limit must be between 1 and {MAX_PAGE}, got {query.limit}")
        keys = _SORT_COLUMNS.get(query.sort, ("id", "topic"))
        where, args = filters(query)
        if query.cursor is not None:
            after = decode_cursor(query.cursor, keys, query.descending)
            op = "<" if query.descending else ">"
            where.append(f"({', '.join(keys)}) {op} ({', '.join('?' * len(keys))})")
            args.extend(after)
        direction = "DESC" if query.descending else "ASC"
        order = [f"{k} {direction}" for k in keys]
        # Pick the page's keys from a covering index first: SQLite would otherwise read
        # every full row while it scans, 30x slower for a substring filter over 1M.
        page_keys = select("id, topic", "pending", where, order)
        columns = ", ".join(f"p.{c}" for c in _PENDING_COLUMNS.split(", "))
        sql = (
            f"SELECT {columns} FROM ({page_keys}) AS k JOIN pending AS p USING (id, topic) "  # noqa: S608
            f"ORDER BY {', '.join(f'p.{o}' for o in order)}"
        )
        with self._connection() as conn:
            rows = conn.execute(sql, [*args, query.limit + 1]).fetchall()
        items = [_pending(row) for row in rows[: query.limit]]
        next_cursor = None
        if len(rows) > query.limit:
            last = items[-1]  # sort columns are named as the Pending fields
            next_cursor = encode_cursor([getattr(last, k) for k in keys], keys, query.descending)
        return Page(items, next_cursor)

    def locate(self, schedule_id: str) -> list[Pending]:
        with self._connection() as conn:
            return _pending_of(conn, schedule_id)

    def get(self, schedule_id: str) -> tuple[list[Pending], list[Version]]:
        with self._transaction() as conn:
            located = _pending_of(conn, schedule_id)
            newest_first = conn.execute(
                "SELECT kind, at_ms, topic, partition, offset, due_ms, target_topic, "
                "lateness_ms, reason, length(payload) FROM versions "
                "WHERE id = ? ORDER BY seq DESC LIMIT ?",
                (schedule_id, MAX_VERSIONS),
            ).fetchall()
            current = [_with_body(conn, pending) for pending in located]
        return current, [_version(row) for row in reversed(newest_first)]

    def dead_letters(
        self, *, limit: int = 100, cursor: str | None = None, reason: str | None = None
    ) -> Page[DeadLetter]:
        if not 1 <= limit <= MAX_PAGE:
            raise ConfigError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
        keys = ("at_ms", "topic", "partition", "offset")
        where: list[str] = []
        args: list[Any] = []
        if reason:
            where.append("instr(reason, ?) > 0")
            args.append(reason)
        if cursor is not None:
            where.append(f"({', '.join(keys)}) < (?, ?, ?, ?)")
            args.extend(decode_cursor(cursor, keys, True))
        sql = select(_DEAD_LETTER_COLUMNS, "dead_letters", where, [f"{k} DESC" for k in keys])
        with self._connection() as conn:
            rows = conn.execute(sql, [*args, limit + 1]).fetchall()
        items = [_dead_letter(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            values = [last.at_ms, last.topic, last.partition, last.offset]
            next_cursor = encode_cursor(values, keys, True)
        return Page(items, next_cursor)

    def stats(self, now_ms: int, *, window_minutes: int = 30) -> Stats:
        first_minute = now_ms // 60_000 - window_minutes + 1
        since_ms = first_minute * 60_000
        with self._transaction() as conn:
            pending = conn.execute("SELECT count(*) FROM pending").fetchone()[0]
            dead = conn.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
            per_minute = dict(
                conn.execute(
                    "SELECT at_ms / 60000, count(*) FROM versions "
                    "WHERE kind = 'fired' AND at_ms >= ? GROUP BY 1",
                    (since_ms,),
                ).fetchall()
            )
            sums = ", ".join(f"sum(lateness_ms <= {b})" for b in LATENESS_BUCKETS_MS)
            cumulative = conn.execute(
                f"SELECT count(*), {sums} FROM versions "  # noqa: S608 - fixed numbers
                "WHERE kind = 'fired' AND at_ms >= ? AND lateness_ms IS NOT NULL",
                (since_ms,),
            ).fetchone()
        total, *upto = (int(x or 0) for x in cumulative)
        counts = [b - a for a, b in zip([0, *upto], [*upto, total], strict=True)]
        return Stats(
            pending=pending,
            dead_letters=dead,
            fired_per_minute=[
                (minute * 60_000, per_minute.get(minute, 0))
                for minute in range(first_minute, first_minute + window_minutes)
            ],
            lateness_buckets_ms=list(LATENESS_BUCKETS_MS),
            lateness_counts=counts,
        )

    def prune(self, before_ms: int) -> int:
        with self._transaction("IMMEDIATE") as conn:
            # Every old version goes except the one a pending schedule is at.
            versions = conn.execute(
                "DELETE FROM versions WHERE at_ms < ? AND NOT EXISTS (SELECT 1 FROM pending p "
                "WHERE p.id = versions.id AND p.topic = versions.topic "
                "AND p.offset = versions.offset AND versions.kind IN ('created', 'updated'))",
                (before_ms,),
            ).rowcount
            dead = conn.execute("DELETE FROM dead_letters WHERE at_ms < ?", (before_ms,)).rowcount
        return int(versions) + int(dead)

    def optimize(self) -> None:
        # Without statistics SQLite may scan the due-time index for a rare id prefix.
        with self._connection() as conn:
            conn.execute("ANALYZE")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _upsert(conn: sqlite3.Connection, change: Upsert) -> None:
    s = change.schedule
    assert s.source is not None  # parsed records always carry one
    existing = conn.execute(
        "SELECT created_ms, partition, offset, updated_ms FROM pending WHERE id = ? AND topic = ?",
        (s.id, s.source.topic),
    ).fetchone()
    if existing is not None:
        held = SourceRef(s.source.topic, existing[1], existing[2], existing[3])
        if not supersedes(s.source, held):
            return  # an older version, read after a newer one of another partition
    created_ms = change.at_ms if existing is None else existing[0]
    conn.execute(
        f"INSERT OR REPLACE INTO pending ({_PENDING_COLUMNS}) "  # noqa: S608 - fixed names
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            s.id,
            s.source.topic,
            s.source.partition,
            s.source.offset,
            s.due_ms,
            s.target_topic,
            s.target_key,
            created_ms,
            s.source.timestamp_ms,
            group_of(s.headers),
            describe_recurrence(s.headers),
            paused_due_ms(s.headers),
            _window_ms(s.headers),
        ),
    )
    kind = "created" if existing is None else "updated"
    conn.execute(
        "INSERT INTO versions (id, topic, partition, offset, kind, at_ms, due_ms, "
        "target_topic, payload, headers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            s.id,
            s.source.topic,
            s.source.partition,
            s.source.offset,
            kind,
            change.at_ms,
            s.due_ms,
            s.target_topic,
            s.payload,
            encode_headers(s.headers),
        ),
    )


_REMOVE_WHERE = {
    "exact": ("partition = :p AND offset = :o"),
    "fired": ("partition = :p AND offset <= :o"),
    # The pending version is older than the tombstone (delayline.core.versions.supersedes).
    "superseded": (
        "((partition = :p AND offset < :o) OR (partition != :p AND "
        "(updated_ms < :ts OR (updated_ms = :ts AND partition < :p))))"
    ),
}


def _remove(conn: sqlite3.Connection, change: Remove) -> None:
    args = {
        "id": change.id,
        "topic": change.topic,
        "p": change.partition,
        "o": change.offset,
        "ts": change.timestamp_ms,
    }
    removed = (
        conn.execute(
            "DELETE FROM pending WHERE id = :id AND topic = :topic AND "  # noqa: S608
            + _REMOVE_WHERE[change.mode],
            args,
        ).rowcount
        > 0
    )
    v = change.version
    if v is not None and (removed or not change.only_if_pending):
        conn.execute(
            "INSERT INTO versions (id, topic, partition, offset, kind, at_ms, due_ms, "
            "target_topic, lateness_ms, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                change.id,
                v.topic,
                v.partition,
                v.offset,
                v.kind,
                v.at_ms,
                v.due_ms,
                v.target_topic,
                v.lateness_ms,
                v.reason,
            ),
        )


def _add_dead_letter(conn: sqlite3.Connection, d: DeadLetter) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            d.topic,
            d.partition,
            d.offset,
            d.at_ms,
            d.reason,
            d.source,
            d.schedule_id,
            d.key,
            d.value,
            encode_headers(d.headers),
        ),
    )


def _window_ms(headers: Headers) -> int | None:
    """The window ``headers`` state; ``None`` for none or one refused."""
    try:
        return window_of(headers)
    except WindowError:
        return None


def _pending(row: tuple[Any, ...]) -> Pending:
    return Pending(*row)


def _with_body(conn: sqlite3.Connection, pending: Pending) -> Pending:
    """``pending`` with the payload and headers of its version."""
    body = conn.execute(
        "SELECT payload, headers FROM versions WHERE id = ? AND topic = ? "
        "AND offset = ? AND kind IN ('created', 'updated') ORDER BY seq DESC LIMIT 1",
        (pending.id, pending.topic, pending.offset),
    ).fetchone()
    if body is None:
        return pending  # its version was pruned: should not happen, the current one is kept
    headers = decode_headers(body[1]) if body[1] else ()
    return replace(pending, payload=body[0] or b"", headers=headers)


def _pending_of(conn: sqlite3.Connection, schedule_id: str) -> list[Pending]:
    """The pending versions of one id, one per schedules topic, without payloads."""
    rows = conn.execute(
        f"SELECT {_PENDING_COLUMNS} FROM pending WHERE id = ? ORDER BY topic",  # noqa: S608
        (schedule_id,),
    ).fetchall()
    return [_pending(row) for row in rows]


def _version(row: tuple[Any, ...]) -> Version:
    kind, at_ms, topic, partition, offset, due_ms, target, lateness, reason, size = row
    return Version(
        kind,
        at_ms,
        topic,
        partition,
        offset,
        due_ms=due_ms,
        target_topic=target,
        lateness_ms=lateness,
        reason=reason,
        payload_size=size,
    )


def _dead_letter(row: tuple[Any, ...]) -> DeadLetter:
    topic, partition, offset, at_ms, reason, source, schedule_id, key, value, headers = row
    return DeadLetter(
        topic,
        partition,
        offset,
        at_ms,
        reason,
        source,
        schedule_id,
        key,
        value,
        headers=decode_headers(headers) if headers else (),
    )
