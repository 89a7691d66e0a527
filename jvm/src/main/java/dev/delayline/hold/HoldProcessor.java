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
 * time (the due time less the lead), in Spark state (RocksDB in the checkpoint): the JVM twin of the Python
 * {@code HoldProcessor}. Every state call stays in the JVM.
 *
 * <p>Grouping key: (source topic, record key). Input: parsed records. Output: event rows.
 */
public final class HoldProcessor extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;

  private final long maxLatenessMs;
  private final long leadMs;
  private transient ValueState<Row> held;

  /**
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   */
  public HoldProcessor(long maxLatenessMs, long leadMs) {
    this.maxLatenessMs = maxLatenessMs;
    this.leadMs = leadMs;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    held = getHandle().getValueState("schedule", Encoders.row(Schemas.STATE), TTLConfig.NONE());
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
    Fold.Result folded =
        new Fold(timerValues.getCurrentProcessingTimeInMs(), maxLatenessMs, leadMs, events)
            .fold(before, records);
    if (folded.timerFrom != null) {
      // The held version's timer is always at its raise time: no need to list timers.
      getHandle().deleteTimer(folded.timerFrom);
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
    if (version != null && Fold.raiseMs(version.dueMs, leadMs) <= nowMs) {
      held.clear();
      events.add(new Fold(nowMs, maxLatenessMs, leadMs, events).fire(version));
    } else if (version != null) {
      // A timer of a replaced version, or one set under a longer lead than now: the held
      // version's own timer must exist (registering an existing one changes nothing).
      getHandle().registerTimer(Fold.raiseMs(version.dueMs, leadMs));
    }
    return CollectionConverters.asScala(events.iterator());
  }

  private Version heldVersion(String topic) {
    Row state = held.get(); // null when nothing is held
    return state == null ? null : Version.fromState(topic, state);
  }
}
