package dev.delayline.hold;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * One record of a schedules topic as the hold sees it: where it came from, and for a
 * schedule the delivery it asks for. The held state is a {@code Version} of kind
 * {@link #SCHEDULE}.
 */
final class Version {
  static final String SCHEDULE = "schedule";
  static final String CANCEL = "cancel";
  static final String INVALID = "invalid";

  final String kind;
  final String topic;
  final int partition;
  final long offset;
  final long timestampMs;
  final String id;
  final long dueMs;
  final String targetTopic;
  final byte[] targetKey;
  final byte[] key;
  final byte[] value;
  final byte[] headers;
  /** On delayline's own tombstone: the offset of the version that fired; else null. */
  final Long firedOffset;
  /** Where the record was read: after {@link #offset} for a copy (a rewrite), which is
   * ordered at the offset of the version it copies. Not kept in state: a held version's
   * is its {@link #offset}. */
  final long readOffset;

  private Version(
      String kind, String topic, int partition, long offset, long timestampMs, String id,
      long dueMs, String targetTopic, byte[] targetKey, byte[] key, byte[] value,
      byte[] headers, Long firedOffset) {
    this(kind, topic, partition, offset, timestampMs, id, dueMs, targetTopic, targetKey, key,
        value, headers, firedOffset, offset);
  }

  private Version(
      String kind, String topic, int partition, long offset, long timestampMs, String id,
      long dueMs, String targetTopic, byte[] targetKey, byte[] key, byte[] value,
      byte[] headers, Long firedOffset, long readOffset) {
    this.kind = kind;
    this.topic = topic;
    this.partition = partition;
    this.offset = offset;
    this.timestampMs = timestampMs;
    this.id = id;
    this.dueMs = dueMs;
    this.targetTopic = targetTopic;
    this.targetKey = targetKey;
    this.key = key;
    this.value = value;
    this.headers = headers;
    this.firedOffset = firedOffset;
    this.readOffset = readOffset;
  }

  /** A parsed input row (the columns of {@code delayline.contract.columns.parsed}; its
   * headers as Kafka's array of key/value structs). */
  static Version fromInput(Row row) {
    String kind = row.getAs("kind");
    Long due = row.getAs("due_ms");
    return new Version(
        kind,
        row.getAs("topic"),
        row.<Integer>getAs("partition"),
        row.<Long>getAs("offset"),
        row.<Long>getAs("timestamp_ms"),
        row.getAs("id"),
        due == null ? 0L : due,
        row.getAs("target_topic"),
        row.getAs("target_key"),
        row.getAs("key"),
        row.getAs("value"),
        encodeHeaders(row.getList(row.fieldIndex("headers"))),
        row.getAs("fired_offset"),
        row.schema().getFieldIndex("read_offset").isDefined()
            ? row.<Long>getAs("read_offset")
            : row.<Long>getAs("offset"));
  }

  /**
   * Kafka's headers as {@code delayline.contract.codec.encode_headers} writes them:
   * version byte 1, then per header a 4-byte big-endian name length, the UTF-8 name, a
   * 4-byte signed value length (-1 for null) and the value.
   */
  static byte[] encodeHeaders(List<Row> headers) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(64);
    out.write(1);
    if (headers != null) {
      for (Row header : headers) {
        byte[] name = header.getString(0).getBytes(StandardCharsets.UTF_8);
        writeInt(out, name.length);
        out.write(name, 0, name.length);
        byte[] value = (byte[]) header.get(1);
        if (value == null) {
          writeInt(out, -1);
        } else {
          writeInt(out, value.length);
          out.write(value, 0, value.length);
        }
      }
    }
    return out.toByteArray();
  }

  private static void writeInt(ByteArrayOutputStream out, int n) {
    out.write(n >>> 24);
    out.write(n >>> 16);
    out.write(n >>> 8);
    out.write(n);
  }

  /** A copy read back from a bucket topic (the columns of
   * {@code delayline.holds.buckets.source}; its headers already encoded). */
  static Version fromCopy(Row row) {
    String id = row.getAs("id");
    return new Version(
        SCHEDULE,
        row.getAs("topic"),
        row.<Integer>getAs("partition"),
        row.<Long>getAs("offset"),
        row.<Long>getAs("timestamp_ms"),
        id,
        row.<Long>getAs("due_ms"),
        row.getAs("target_topic"),
        row.getAs("target_key"),
        id.getBytes(StandardCharsets.UTF_8),
        row.getAs("value"),
        row.getAs("enc_headers"),
        null);
  }

  /** The version the bucket gate keeps: where it came from and when it is due, never
   * its payload or headers (those wait in the bucket topics). */
  static Version fromGateState(String topic, Row state) {
    String id = state.getString(0);
    return new Version(
        SCHEDULE, topic, state.getInt(1), state.getLong(2), state.getLong(3), id,
        state.getLong(4), state.getString(5), (byte[]) state.get(6),
        id.getBytes(StandardCharsets.UTF_8), null, null, null);
  }

  Row toGateState(long routedAtMs) {
    return RowFactory.create(
        id, partition, offset, timestampMs, dueMs, targetTopic, targetKey, routedAtMs);
  }

  /** The held version stored in state (its topic is the grouping key's). */
  static Version fromState(String topic, Row state) {
    String id = state.getString(0);
    return new Version(
        SCHEDULE, topic, state.getInt(1), state.getLong(2), state.getLong(3), id,
        state.getLong(4), state.getString(5), (byte[]) state.get(6),
        id.getBytes(StandardCharsets.UTF_8), (byte[]) state.get(7), (byte[]) state.get(8), null);
  }

  Row toState() {
    return RowFactory.create(
        id, partition, offset, timestampMs, dueMs, targetTopic, targetKey, value, headers);
  }

  boolean isSchedule() {
    return SCHEDULE.equals(kind);
  }

  boolean isCancel() {
    return CANCEL.equals(kind);
  }

  boolean isInvalid() {
    return INVALID.equals(kind);
  }

  /** Whether this record is a later version of the same id than {@code old}
   * ({@code delayline.core.versions.supersedes}). */
  boolean supersedes(Version old) {
    if (partition == old.partition) {
      return offset > old.offset;
    }
    if (timestampMs != old.timestampMs) {
      return timestampMs > old.timestampMs;
    }
    return partition > old.partition;
  }

  boolean samePlace(Version other) {
    return partition == other.partition
        && offset == other.offset
        && timestampMs == other.timestampMs
        && Objects.equals(topic, other.topic);
  }
}
