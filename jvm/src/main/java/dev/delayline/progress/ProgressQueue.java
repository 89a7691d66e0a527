package dev.delayline.progress;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * Keeps the JSON of each micro-batch's progress report until Python takes it.
 *
 * <p>A listener written in Python makes PySpark turn every report into Python objects
 * field by field on the listener thread: hundreds of py4j round trips per batch (the
 * state operator's custom metrics alone are about fifty), each name looked up by
 * reflection. Measured at a trickle of 10 schedules/s: that thread used a quarter of a
 * core. Here a report costs one {@code json()} call in the JVM, and the driver takes
 * all reports queued so far with one call to {@link #drain}.
 *
 * <p>Holds at most {@code capacity} reports: when nobody drains, the oldest are dropped,
 * so the queue never grows without bound. Thread-safe.
 */
public final class ProgressQueue extends StreamingQueryListener {
  private static final long serialVersionUID = 1L;

  private final ArrayBlockingQueue<String> reports;

  /** @param capacity the most reports kept between two drains (at least 1) */
  public ProgressQueue(int capacity) {
    reports = new ArrayBlockingQueue<>(Math.max(1, capacity));
  }

  @Override
  public void onQueryStarted(QueryStartedEvent event) {}

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    String json = event.progress().json();
    while (!reports.offer(json)) {
      reports.poll(); // full: the oldest report goes
    }
  }

  @Override
  public void onQueryIdle(QueryIdleEvent event) {}

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {}

  /** The reports queued since the last call, oldest first (an empty array if none). */
  public String[] drain() {
    List<String> taken = new ArrayList<>();
    reports.drainTo(taken);
    return taken.toArray(new String[0]);
  }
}
