package dev.delayline.gate;

import java.util.Map;
import java.util.Optional;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;

/**
 * Spark's Kafka micro-batch stream behind a {@link Gate}: while the gate is closed the
 * stream reports no new input (the offsets where the last batch ended), so Spark runs no
 * batch and asks Kafka nothing; once it opens, the next trigger reads everything that
 * arrived, as the Kafka source alone would. Offsets, their checkpoint format, planning and
 * reading are the Kafka source's own: a checkpoint written with or without the gate is
 * read by either.
 *
 * <p>A trigger that finds the gate closed waits up to {@code waitMs} for it to open: with
 * Spark's trigger interval at 0, an idle query checks the gate about once per {@code
 * waitMs}, not five times a second, and a batch starts as soon as the gate opens.
 */
final class GatedKafkaStream implements MicroBatchStream, SupportsAdmissionControl, ReportsSourceMetrics {
  private final MicroBatchStream kafka;
  private final SupportsAdmissionControl admission;
  private final Gate gate;
  private final long waitMs;

  GatedKafkaStream(MicroBatchStream kafka, Gate gate, long waitMs) {
    this.kafka = kafka;
    this.admission = (SupportsAdmissionControl) kafka;
    this.gate = gate;
    this.waitMs = waitMs;
  }

  @Override
  public Offset latestOffset(Offset start, ReadLimit limit) {
    boolean admitted;
    try {
      admitted = gate.admits(waitMs);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // the query stops: Spark looks at the flag
      return start;
    }
    if (!admitted) {
      return start;
    }
    Offset next = admission.latestOffset(start, limit);
    Offset available = admission.reportLatestOffset();
    gate.drained(available == null || available.equals(next));
    return next;
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return admission.getDefaultReadLimit();
  }

  @Override
  public Offset reportLatestOffset() {
    return admission.reportLatestOffset();
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is used instead");
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return kafka.planInputPartitions(start, end);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return kafka.createReaderFactory();
  }

  @Override
  public Offset initialOffset() {
    return kafka.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return kafka.deserializeOffset(json);
  }

  @Override
  public void commit(Offset end) {
    kafka.commit(end);
  }

  @Override
  public void stop() {
    kafka.stop();
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    return kafka instanceof ReportsSourceMetrics reports
        ? reports.metrics(latestConsumedOffset)
        : Map.of();
  }

  @Override
  public String toString() {
    return kafka.toString();
  }
}
