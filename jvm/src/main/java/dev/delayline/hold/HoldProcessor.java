package dev.delayline.hold;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Keeps the held version of each schedule and one processing-time timer at its raise
 * time (the due time less the lead, or less the burst lead for one of many due in the
 * same second: {@link Burst}), in Spark state (RocksDB in the checkpoint): the JVM twin
 * of the Python {@code HoldProcessor}. Every state call stays in the JVM.
 *
 * <p>Grouping key: (source topic, record key). Input: parsed records. Output: event rows.
 */
public final class HoldProcessor extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final long maxLatenessMs;
  private final long leadMs;
  private final long burstLeadMs;
  private final int dense;
  private final String noticeRules;
  private transient ValueState<Row> held;
  private transient Burst burst;
  private transient Notice notice;

  /**
   * A hold that raises every schedule at the lead.
   *
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   */
  public HoldProcessor(long maxLatenessMs, long leadMs) {
    this(maxLatenessMs, leadMs, 0, Integer.MAX_VALUE);
  }

  /**
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   * @param burstLeadMs how long before its due time one of many due in the same second is
   *     handed over ({@link Burst}); at most {@code leadMs}: none is raised early
   * @param dense more planned in one task of a batch with one due second than this: many
   */
  public HoldProcessor(long maxLatenessMs, long leadMs, long burstLeadMs, int dense) {
    this(maxLatenessMs, leadMs, burstLeadMs, dense, "");
  }

  /**
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   * @param burstLeadMs as for the constructor without notice rules
   * @param dense as for the constructor without notice rules
   * @param noticeRules the versions of short notice, never held ({@link Notice}); empty:
   *     every version is held
   */
  public HoldProcessor(
      long maxLatenessMs, long leadMs, long burstLeadMs, int dense, String noticeRules) {
    this.noticeRules = noticeRules;
    Notice.parse(noticeRules); // refused here, on the driver, not in a task
    this.maxLatenessMs = maxLatenessMs;
    this.leadMs = leadMs;
    this.burstLeadMs = burstLeadMs;
    this.dense = dense;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getValueState("schedule", Encoders.row(Schemas.STATE), TTLConfig.NONE());
    // With a lead of 0 the executors deliver what is raised: nothing may be raised early.
    burst = leadMs > 0 && burstLeadMs > leadMs ? new Burst(burstLeadMs, dense) : null;
    notice = Notice.parse(noticeRules);
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    String topic = key.getString(0);
    Version before = heldVersion(topic);
    List<Version> records = new ArrayList<>();
    while (rows.hasNext()) {
      records.add(Version.fromInput(rows.next()));
    }
    List<Row> events = new ArrayList<>();
    long nowMs = timerValues.getCurrentProcessingTimeInMs();
    Fold.Result folded =
        new Fold(nowMs, maxLatenessMs, leadMs, events, burst, notice).fold(before, records);
    if (folded.timerFrom != null) {
      // At its raise time or, raised early, before it: the timers of the key say which.
      for (Long timer : timers()) {
        getHandle().deleteTimer(timer);
      }
    }
    if (burst != null && before != null && folded.held == before) {
      keepRaisedEarly(before, events, nowMs);
    }
    if (folded.held != before) {
      if (folded.held == null) {
        held.clear();
      } else {
        held.update(folded.held.toState());
      }
    }
    if (folded.timerTo != null) {
      getHandle().registerTimer(folded.timerTo);
    }
    return CollectionConverters.asScala(events.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    long nowMs = timerValues.getCurrentProcessingTimeInMs();
    Version version = heldVersion(key.getString(0));
    List<Row> events = new ArrayList<>(1);
    if (version != null && (raisedEarly(version, expiredTimerInfo.getExpiryTimeInMs())
        || Fold.raiseMs(version.dueMs, leadMs) <= nowMs)) {
      held.clear();
      events.add(new Fold(nowMs, maxLatenessMs, leadMs, events).fire(version));
    } else if (version != null) {
      // A timer of a replaced version, or one set under a longer lead than now: the held
      // version's own timer must exist (registering an existing one changes nothing).
      getHandle().registerTimer(Fold.raiseMs(version.dueMs, leadMs));
    }
    return CollectionConverters.asScala(events.iterator());
  }

  /**
   * A held version the fold rewrites (a record that compaction would keep instead of it
   * landed after it) is not rewritten when its timer, set early, raises it in this very
   * batch: the fold judges by the lead's raise time, and a copy read back after the
   * version was raised would be planned again. Only listed on that rare path.
   */
  private void keepRaisedEarly(Version version, List<Row> events, long nowMs) {
    Row rewrite = null;
    for (Row event : events) {
      if (Fold.REWRITE.equals(event.getString(0))) {
        rewrite = event;
      }
    }
    if (rewrite == null) {
      return;
    }
    for (Long timer : timers()) {
      if (timer <= nowMs && raisedEarly(version, timer)) {
        events.remove(rewrite);
        return;
      }
    }
  }

  /** The current key's timers. */
  private List<Long> timers() {
    List<Long> timers = new ArrayList<>(1);
    scala.collection.Iterator<Object> listed = getHandle().listTimers();
    while (listed.hasNext()) {
      timers.add((Long) listed.next());
    }
    return timers;
  }

  /** Whether a timer expiring at {@code expiryMs} is {@code version}'s early one. */
  private boolean raisedEarly(Version version, long expiryMs) {
    return burst != null && expiryMs == burst.raiseMs(version.dueMs, leadMs);
  }

  private Version heldVersion(String topic) {
    Row state = held.get(); // null when nothing is held
    return state == null ? null : Version.fromState(topic, state);
  }
}
