package dev.delayline.gate;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Whether the next micro-batch of a pipeline may read new input: a batch when the work
 * needs one, not whenever the input moved.
 *
 * <p>Spark runs a micro-batch whenever a source has new records, and most records that
 * arrive at a pipeline with a lead do not need one soon: delayline's own tombstones and
 * transaction markers, and schedules due minutes from now. The pipeline's waker decides
 * when a batch is needed (a timer falls due, a new schedule must be raised within its
 * lead, too much waits unread, a record has waited long enough) and calls {@link #open}
 * after writing a wake record; the gated source ({@link GatedKafkaStream}) then lets the
 * next trigger read everything that arrived, and closes again.
 *
 * <p>Guarantees: an {@link #open} is never lost (the next check after it admits, whatever
 * happened in between); a batch cut short by the source's read limit keeps the gate open
 * until the input is read to its end, so a backlog never waits for another open; nothing
 * is ever skipped, only read later. Thread-safe.
 */
public final class Gate {
  private static final ConcurrentHashMap<String, Gate> GATES = new ConcurrentHashMap<>();

  private final AtomicBoolean open = new AtomicBoolean(true); // the first check reads
  private volatile boolean draining;
  private final AtomicLong opened = new AtomicLong();
  private final AtomicLong admitted = new AtomicLong();
  private final Object waiting = new Object(); // a check waits on it for an open
  private volatile boolean checking; // a check waits for an open now

  private Gate() {}

  /** The gate of the pipeline named {@code name} in this JVM (made on first use). */
  public static Gate named(String name) {
    return GATES.computeIfAbsent(name, n -> new Gate());
  }

  /** Let the next trigger read what has arrived (thread-safe; opens are not counted up). */
  public void open() {
    opened.incrementAndGet();
    synchronized (waiting) {
      open.set(true);
      waiting.notifyAll();
    }
  }

  /** Times {@link #open} was called. */
  public long opened() {
    return opened.get();
  }

  /** Triggers that were let through: each one's batch read the input to its end then. */
  public long admitted() {
    return admitted.get();
  }

  /** Whether a check now may read new input: takes the open, if any. */
  boolean admits() {
    if (draining || open.getAndSet(false)) {
      admitted.incrementAndGet();
      return true;
    }
    return false;
  }

  /**
   * Whether a check may read new input, waiting up to {@code waitMs} for an {@link #open}
   * if the gate is closed: takes the open, if any. Returns as soon as the gate opens.
   *
   * @throws InterruptedException the thread was interrupted while it waited (the query
   *     stops)
   */
  boolean admits(long waitMs) throws InterruptedException {
    if (admits()) {
      return true;
    }
    if (waitMs <= 0) {
      return false;
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
    checking = true;
    try {
      synchronized (waiting) {
        while (!open.get()) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            return false;
          }
          TimeUnit.NANOSECONDS.timedWait(waiting, left);
        }
      }
    } finally {
      checking = false;
    }
    return admits();
  }

  /**
   * Whether a trigger waits for an open now: it has read nothing and logged no batch, so
   * stopping the query then loses no work (Spark calls its trigger active meanwhile).
   */
  public boolean waiting() {
    return checking;
  }

  /** Set after an admitted read: whether the read limit left input unread. */
  void drained(boolean complete) {
    draining = !complete;
  }
}
