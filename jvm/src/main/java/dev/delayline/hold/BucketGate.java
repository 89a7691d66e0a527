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
 * The bucket hold's gate: the rules of {@link Fold} over versions, while the schedules
 * themselves wait in bucket topics as copies.
 *
 * <p>Grouping key: (source topic, schedule id). Input: parsed records of the schedules
 * topics, and copies read back from the bucket topics (kind {@code copy}). State: the
 * held version without payload or headers, and the batch time its live copy was routed
 * at. No timers: a copy comes back when its bucket is read.
 *
 * <p>Per batch, the records are folded first (so a cancel read with a copy wins). A
 * version the fold newly holds is routed: a {@code route} event, which the fire stage
 * writes as a copy into the bucket of its remaining wait. Then each copy: the live one
 * (same version, same routing time) fires when its raise time has come, else is routed
 * again; any other copy (of a replaced, cancelled or fired version, or of an earlier
 * rebuild) is dropped, counted as {@code superseded}. So at most one copy of a version is
 * ever live, and a cancel reaches a copy wherever it travels: the copy is judged when it
 * arrives, against the state of that moment.
 */
public final class BucketGate extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;

  static final String COPY = "copy";
  static final String ROUTE = "route";
  static final String SUPERSEDED = "superseded";

  private final long maxLatenessMs;
  private final long leadMs;
  private transient ValueState<Row> held;

  /**
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   */
  public BucketGate(long maxLatenessMs, long leadMs) {
    this.maxLatenessMs = maxLatenessMs;
    this.leadMs = leadMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getValueState("version", Encoders.row(Schemas.GATE_STATE), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    long nowMs = timerValues.getCurrentProcessingTimeInMs();
    String topic = key.getString(0);
    Row state = held.get(); // null when nothing is held
    Version before = state == null ? null : Version.fromGateState(topic, state);
    long routedBefore = state == null ? -1L : state.getLong(7);
    List<Version> records = new ArrayList<>();
    List<Row> copies = new ArrayList<>();
    while (rows.hasNext()) {
      Row row = rows.next();
      if (COPY.equals(row.getAs("kind"))) {
        copies.add(row);
      } else {
        records.add(Version.fromInput(row));
      }
    }
    List<Row> events = new ArrayList<>();
    Fold fold = new Fold(nowMs, maxLatenessMs, leadMs, events);
    Version current = before;
    long routedAt = routedBefore;
    if (!records.isEmpty()) {
      current = fold.fold(before, records).held;
      if (current != null && current != before) {
        events.add(fold.scheduleEvent(ROUTE, current, null));
        routedAt = nowMs;
      }
    }
    for (Row row : copies) {
      Version copy = Version.fromCopy(row);
      long copyRoutedAt = row.<Long>getAs("routed_at");
      if (current == null || copyRoutedAt != routedAt || !current.samePlace(copy)) {
        events.add(fold.countEvent(SUPERSEDED, copy.id, null));
      } else if (Fold.raiseMs(copy.dueMs, leadMs) <= nowMs) {
        events.add(fold.fire(copy));
        current = null;
      } else {
        events.add(fold.scheduleEvent(ROUTE, copy, null));
        routedAt = nowMs;
      }
    }
    if (current == null) {
      if (state != null) {
        held.clear();
      }
    } else if (current != before || routedAt != routedBefore) {
      held.update(current.toGateState(routedAt));
    }
    return CollectionConverters.asScala(events.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    // The gate sets no timers; a timer from another processor's state is not ours.
    return CollectionConverters.asScala(new ArrayList<Row>().iterator());
  }
}
