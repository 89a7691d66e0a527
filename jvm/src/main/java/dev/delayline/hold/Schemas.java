package dev.delayline.hold;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The row shapes of the hold, field for field those of {@code delayline.contract.events}
 * (a Python test compares them through {@link Holds#eventSchemaJson()}).
 */
final class Schemas {
  private Schemas() {}

  /** The grouping key: (source topic, record key or empty bytes). */
  static final StructType KEY =
      new StructType(
          new StructField[] {
            field("topic", DataTypes.StringType), field("gkey", DataTypes.BinaryType),
          });

  /** The held version of one schedule ({@code rows.STATE_SCHEMA}). */
  static final StructType STATE =
      new StructType(
          new StructField[] {
            field("id", DataTypes.StringType),
            field("partition", DataTypes.IntegerType),
            field("offset", DataTypes.LongType),
            field("timestamp_ms", DataTypes.LongType),
            field("due_ms", DataTypes.LongType),
            field("target_topic", DataTypes.StringType),
            field("target_key", DataTypes.BinaryType),
            field("value", DataTypes.BinaryType),
            field("headers", DataTypes.BinaryType),
          });

  /** The bucket gate's state of one schedule: the held version without its payload
   * and headers, and when its live copy was routed. */
  static final StructType GATE_STATE =
      new StructType(
          new StructField[] {
            field("id", DataTypes.StringType),
            field("partition", DataTypes.IntegerType),
            field("offset", DataTypes.LongType),
            field("timestamp_ms", DataTypes.LongType),
            field("due_ms", DataTypes.LongType),
            field("target_topic", DataTypes.StringType),
            field("target_key", DataTypes.BinaryType),
            field("routed_at_ms", DataTypes.LongType),
          });

  /** What the hold emits for the fire stage ({@code rows.EVENT_SCHEMA}). */
  static final StructType EVENT =
      new StructType(
          new StructField[] {
            field("kind", DataTypes.StringType),
            field("id", DataTypes.StringType),
            field("src_topic", DataTypes.StringType),
            field("src_partition", DataTypes.IntegerType),
            field("src_offset", DataTypes.LongType),
            field("src_timestamp_ms", DataTypes.LongType),
            field("key", DataTypes.BinaryType),
            field("value", DataTypes.BinaryType),
            field("headers", DataTypes.BinaryType),
            field("target_topic", DataTypes.StringType),
            field("target_key", DataTypes.BinaryType),
            field("due_ms", DataTypes.LongType),
            field("reason", DataTypes.StringType),
            field("at_ms", DataTypes.LongType),
          });

  private static StructField field(String name, org.apache.spark.sql.types.DataType type) {
    return DataTypes.createStructField(name, type, true);
  }
}
