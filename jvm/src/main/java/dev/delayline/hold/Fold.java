package dev.delayline.hold;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * The hold's rules, exactly those of {@code delayline.holds.fold} (read its module
 * docstring for the why of each). The shared hold suite runs against both.
 *
 * <p>Deterministic: the result depends only on the held version, the records and the
 * batch time (and, given a {@link Burst}, the versions its task planned before in the
 * batch, in Spark's key order), so a replayed micro-batch emits the same events.
 */
final class Fold {
  static final String RAISE = "fire";
  static final String DEAD = "dead";
  static final String PLANNED = "planned";
  static final String UPDATED = "updated";
  static final String CANCELLED = "cancelled";
  static final String UNKNOWN_CANCEL = "unknown_cancel";
  static final String OWN_TOMBSTONE = "own_tombstone";
  static final String STALE = "stale";
  static final String MISSED = "missed";
  static final String SHORT = "short";
  static final String DIRECT = "direct";
  static final String REWRITE = "rewrite";
  static final String RETIRE = "retire";
  static final String EXPIRED = "expired";
  static final String EARLY = "early";

  /** What one fold leaves: the held version and the timers to move. */
  static final class Result {
    final Version held;
    final Long timerFrom;
    final Long timerTo;

    Result(Version held, Long timerFrom, Long timerTo) {
      this.held = held;
      this.timerFrom = timerFrom;
      this.timerTo = timerTo;
    }
  }

  private final long nowMs;
  private final long maxLatenessMs;
  private final long leadMs;
  private final List<Row> events;
  private final Burst burst;
  private final Notice notice;

  /**
   * @param nowMs the batch time
   * @param maxLatenessMs later than this a due version expires; negative: never
   * @param leadMs how long before its due time a version is handed over
   * @param events where the events go, in order
   */
  Fold(long nowMs, long maxLatenessMs, long leadMs, List<Row> events) {
    this(nowMs, maxLatenessMs, leadMs, events, null);
  }

  /**
   * @param burst which schedules are raised early, the task's counts; null: none is
   */
  Fold(long nowMs, long maxLatenessMs, long leadMs, List<Row> events, Burst burst) {
    this(nowMs, maxLatenessMs, leadMs, events, burst, null);
  }

  /**
   * @param notice which versions are of short notice, never held; null: none is
   */
  Fold(
      long nowMs, long maxLatenessMs, long leadMs, List<Row> events, Burst burst,
      Notice notice) {
    this.nowMs = nowMs;
    this.maxLatenessMs = maxLatenessMs;
    this.leadMs = leadMs;
    this.events = events;
    this.burst = burst;
    this.notice = notice;
  }

  /** When a version due at {@code dueMs} is handed over: its timer ({@code fold.raise_ms}). */
  static long raiseMs(long dueMs, long leadMs) {
    return dueMs - leadMs;
  }

  /** Apply one batch's records of one id to the held version ({@code fold.fold}). */
  Result fold(Version held, List<Version> records) {
    List<Version> ordered = new ArrayList<>(records);
    ordered.sort(
        Comparator.comparingInt((Version v) -> v.partition).thenComparingLong(v -> v.readOffset));
    Map<Integer, Long> lastIn = new HashMap<>();
    for (Version v : ordered) {
      lastIn.put(v.partition, v.readOffset);
    }
    List<Version> retired = new ArrayList<>();
    Version current = held;
    long currentAt = held == null ? -1L : held.readOffset; // a copy sits after its version
    Version newest = held;
    boolean hidden = false;
    for (Version record : ordered) {
      if (record.isInvalid()) {
        events.add(recordEvent(record));
        hidden = hidden || hides(record, current);
      } else if (record.isCancel() && record.firedOffset != null) {
        String kind = ownTombstone(record, current);
        hidden = hidden || (STALE.equals(kind) && hides(record, current));
        current = STALE.equals(kind) ? current : null;
        events.add(countEvent(kind, record.id, null));
      } else if (newest != null && !record.supersedes(newest)) {
        events.add(countEvent(STALE, record.id, null));
        if (record.isSchedule() && current != null && current.partition == record.partition
            && current.offset == record.offset) {
          // A copy of the held version, read back: it now sits after what hid it.
          currentAt = record.readOffset;
          hidden = false;
        } else if (record.isSchedule()) {
          // A copy of an older version lands after the held one: it hides it.
          hidden = hidden || hides(record, current);
          retire(record, record.readOffset, newest, lastIn, retired);
        }
      } else if (record.isCancel()) {
        events.add(countEvent(current == null ? UNKNOWN_CANCEL : CANCELLED, record.id, null));
        retire(current, currentAt, record, lastIn, retired);
        current = null;
        newest = record;
        hidden = false;
      } else if (notice != null && notice.isShort(record)) {
        events.add(countEvent(DIRECT, record.id, null));
        retire(current, currentAt, record, lastIn, retired);
        current = null;
        newest = record;
        hidden = false;
      } else {
        retire(current, currentAt, record, lastIn, retired);
        current = record;
        currentAt = record.readOffset;
        newest = record;
        hidden = false;
      }
    }
    return settle(held, current, hidden);
  }

  /** The event of a held version whose timer is due: RAISE, or DEAD when expired. */
  Row fire(Version schedule) {
    if (maxLatenessMs >= 0 && nowMs - schedule.dueMs > maxLatenessMs) {
      return scheduleEvent(DEAD, schedule, EXPIRED);
    }
    return scheduleEvent(RAISE, schedule, null);
  }

  private void retire(
      Version dropped, long readAt, Version by, Map<Integer, Long> lastIn, List<Version> retired) {
    if (dropped == null || dropped.partition == by.partition) {
      return; // compaction of its own partition removes it
    }
    if (lastIn.getOrDefault(dropped.partition, -1L) > readAt) {
      return;
    }
    for (Version done : retired) {
      if (done.samePlace(dropped)) {
        return;
      }
    }
    retired.add(dropped);
    events.add(scheduleEvent(RETIRE, dropped, null));
  }

  private static String ownTombstone(Version tombstone, Version held) {
    if (held == null) {
      return OWN_TOMBSTONE;
    }
    if (held.partition == tombstone.partition && held.offset <= tombstone.firedOffset) {
      return CANCELLED;
    }
    return STALE; // our tombstone of an older, fired version: the held one stays
  }

  /** Whether compaction would keep {@code record} instead of {@code held}. */
  private static boolean hides(Version record, Version held) {
    return held != null && held.partition == record.partition && record.readOffset > held.offset;
  }

  private Result settle(Version before, Version held, boolean hidden) {
    boolean rewrite = hidden && held != null && raiseMs(held.dueMs, leadMs) > nowMs;
    if (rewrite) {
      events.add(scheduleEvent(REWRITE, held, null));
    }
    if (held == before) {
      return new Result(held, null, null);
    }
    Long timerFrom = before == null ? null : raiseMs(before.dueMs, leadMs);
    if (held == null) {
      return new Result(null, timerFrom, null);
    }
    if (raiseMs(held.dueMs, leadMs) <= nowMs) {
      events.add(countEvent(held.dueMs <= nowMs ? MISSED : SHORT, held.id, null));
      events.add(fire(held));
      return new Result(null, timerFrom, null);
    }
    events.add(countEvent(before == null ? PLANNED : UPDATED, held.id, held.dueMs));
    // A rewritten version keeps its lead: its copy is read back before it is raised.
    if (burst != null && !rewrite && burst.planned(held.dueMs, nowMs)) {
      long early = burst.raiseMs(held.dueMs, leadMs);
      events.add(countEvent(EARLY, held.id, held.dueMs));
      if (early <= nowMs) {
        events.add(fire(held));
        return new Result(null, timerFrom, null);
      }
      return new Result(held, timerFrom, early);
    }
    return new Result(held, timerFrom, raiseMs(held.dueMs, leadMs));
  }

  Row scheduleEvent(String kind, Version s, String reason) {
    return RowFactory.create(
        kind, s.id, s.topic, s.partition, s.offset, s.timestampMs,
        s.id.getBytes(StandardCharsets.UTF_8), s.value, s.headers, s.targetTopic, s.targetKey,
        s.dueMs, reason, nowMs);
  }

  /** A record that holds no schedule; its dead-letter reason is the Python parser's,
   * found by the fire stage (one definition of every reason). */
  private Row recordEvent(Version r) {
    return RowFactory.create(
        DEAD, null, r.topic, r.partition, r.offset, r.timestampMs, r.key, r.value, r.headers,
        null, null, null, null, nowMs);
  }

  Row countEvent(String kind, String id, Long dueMs) {
    return RowFactory.create(
        kind, id, null, null, null, null, null, null, null, null, null, dueMs, null, nowMs);
  }
}
