package dev.delayline.hold;

import java.util.HashMap;
import java.util.Map;

/**
 * Which schedules are raised early because many fall due together ({@code fold.Burst}).
 *
 * <p>Handing a burst over takes longer than the lead: 50,000 schedules due in one second
 * take the batch that raises them and the committers that write them several seconds. So
 * a schedule planned in a batch where more than {@link #dense} others of its task were
 * planned with the same due second is raised {@link #burstLeadMs} before the start of that
 * second (or at once when that time has come) instead of the lead; the committer still delivers it at
 * its due time, and its watch still withholds what a later cancel or update ends.
 *
 * <p>Deterministic: Spark hands a task its keys in order (the state operator sorts its
 * input by key) and a replayed batch reads the same records into the same partitions, so
 * the counts, and which schedules are dense, are the same on a replay. One per task: Spark
 * deserializes the processor for each task; the counts also start again when the batch
 * time changes (Spark's {@code TwsTester} keeps one processor for every batch).
 */
final class Burst {
  /** The most due seconds one task counts: past it a new second is never dense. */
  static final int MAX_SECONDS = 65_536;

  final long burstLeadMs;
  final int dense;
  private final Map<Long, int[]> counts = new HashMap<>();
  private long batchMs = Long.MIN_VALUE;

  /**
   * @param burstLeadMs how long before the start of its due second a dense schedule is
   *     raised
   * @param dense more planned with one due second in one task than this: dense
   */
  Burst(long burstLeadMs, int dense) {
    this.burstLeadMs = burstLeadMs;
    this.dense = dense;
  }

  /** Count one schedule planned at batch time {@code nowMs}, due at {@code dueMs}: whether
   * it is dense. */
  boolean planned(long dueMs, long nowMs) {
    if (nowMs != batchMs) {
      counts.clear();
      batchMs = nowMs;
    }
    Long second = Math.floorDiv(dueMs, 1000L);
    int[] count = counts.get(second);
    if (count == null) {
      if (counts.size() >= MAX_SECONDS) {
        return false;
      }
      count = new int[1];
      counts.put(second, count);
    }
    count[0] += 1;
    return count[0] > dense;
  }

  /** When a dense schedule due at {@code dueMs} is raised, under a lead of {@code leadMs}
   * ({@code fold.burst_raise_ms}): its due second's start less the longer of the two
   * leads, so one timer time serves the second and one batch raises it. */
  long raiseMs(long dueMs, long leadMs) {
    return Math.floorDiv(dueMs, 1000L) * 1000L - Math.max(burstLeadMs, leadMs);
  }
}
