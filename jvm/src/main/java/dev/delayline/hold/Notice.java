package dev.delayline.hold;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The notice rules of {@code delayline.contract.notice}: which schedule versions are of
 * short notice, so the hold never holds them (the committers hand them over). Read from
 * {@code NoticeRules.for_jvm}: epochs oldest first, separated by {@code |}; each its
 * notice in milliseconds, {@code ;} and its starts as {@code topic:partition:offset}
 * separated by {@code ,}.
 *
 * <p>Deterministic: the answer depends only on the version's place, record timestamp and
 * due time, so a replayed batch and a rebuild judge each version as the first read did.
 */
final class Notice {
  private final long[] noticeMs;
  private final List<Map<String, Long>> starts;

  private Notice(long[] noticeMs, List<Map<String, Long>> starts) {
    this.noticeMs = noticeMs;
    this.starts = starts;
  }

  /**
   * The rules {@code spec} states, or null when it states none (empty).
   *
   * @throws IllegalArgumentException {@code spec} is not of that form
   */
  static Notice parse(String spec) {
    if (spec == null || spec.isEmpty()) {
      return null;
    }
    String[] epochs = spec.split("\\|", -1);
    long[] noticeMs = new long[epochs.length];
    List<Map<String, Long>> starts = new ArrayList<>(epochs.length);
    for (int i = 0; i < epochs.length; i++) {
      String[] parts = epochs[i].split(";", -1);
      if (parts.length != 2) {
        throw new IllegalArgumentException("not a notice epoch: " + epochs[i]);
      }
      noticeMs[i] = Long.parseLong(parts[0]);
      Map<String, Long> epochStarts = new HashMap<>();
      if (!parts[1].isEmpty()) {
        for (String start : parts[1].split(",", -1)) {
          int last = start.lastIndexOf(':');
          int before = start.lastIndexOf(':', last - 1);
          if (before <= 0) {
            throw new IllegalArgumentException("not a notice start: " + start);
          }
          long offset = Long.parseLong(start.substring(last + 1));
          int partition = Integer.parseInt(start.substring(before + 1, last));
          epochStarts.put(start.substring(0, before) + ":" + partition, offset);
        }
      }
      starts.add(epochStarts);
    }
    return new Notice(noticeMs, starts);
  }

  /** Whether {@code v}, a version read in a batch, is of short notice ({@code
   * NoticeRules.short}); a copy (read after the place it names) never is. */
  boolean isShort(Version v) {
    if (!v.isSchedule() || v.readOffset != v.offset) {
      return false;
    }
    String place = v.topic + ":" + v.partition;
    for (int i = noticeMs.length - 1; i >= 0; i--) {
      if (starts.get(i).getOrDefault(place, 0L) <= v.offset) {
        return noticeMs[i] > 0 && v.dueMs - v.timestampMs < noticeMs[i];
      }
    }
    return false;
  }
}
