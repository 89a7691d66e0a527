package dev.delayline.hold;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;

/** The static entry points Python calls through py4j. */
public final class Holds {
  private Holds() {}

  /**
   * The hold stage: parsed records in, event rows out.
   *
   * @param parsed the parsed schedules stream ({@code delayline.contract.columns.parsed})
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   * @param burstLeadMs how long before its due time one of many due in the same second is
   *     handed over ({@link Burst})
   * @param dense more planned in one task of a batch with one due second than this: many
   * @param noticeRules the versions of short notice, never held ({@link Notice}); empty:
   *     every version is held
   */
  public static Dataset<Row> apply(
      Dataset<Row> parsed, long maxLatenessMs, long leadMs, long burstLeadMs, int dense,
      String noticeRules) {
    // Grouped by columns, not by a key function: a function would first turn every
    // input row into a Java object just to read two of its fields.
    return parsed
        .groupBy(functions.col("topic"), functions.col("gkey"))
        .as(Encoders.row(Schemas.KEY), Encoders.row(parsed.schema()))
        .transformWithState(
            new HoldProcessor(maxLatenessMs, leadMs, burstLeadMs, dense, noticeRules),
            TimeMode.ProcessingTime(),
            OutputMode.Append(),
            Encoders.row(Schemas.EVENT));
  }

  /**
   * The bucket hold's stage: parsed records and bucket copies in (one frame, the columns
   * of {@code delayline.holds.buckets.source}), event rows out.
   *
   * @param input the parsed schedules stream united with the copies read back
   * @param maxLatenessMs later than this a due schedule is dead-lettered; negative: never
   * @param leadMs how long before its due time a schedule is handed over
   */
  public static Dataset<Row> applyBuckets(Dataset<Row> input, long maxLatenessMs, long leadMs) {
    return input
        .groupBy(functions.col("topic"), functions.col("gkey"))
        .as(Encoders.row(Schemas.KEY), Encoders.row(input.schema()))
        .transformWithState(
            new BucketGate(maxLatenessMs, leadMs),
            TimeMode.ProcessingTime(),
            OutputMode.Append(),
            Encoders.row(Schemas.EVENT));
  }

  /** The event schema as JSON, for the Python side to check against its own. */
  public static String eventSchemaJson() {
    return Schemas.EVENT.json();
  }
}
