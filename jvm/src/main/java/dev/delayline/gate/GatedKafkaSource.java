package dev.delayline.gate;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka source ({@code format("kafka")}, every option the same) whose micro-batch
 * stream waits for a {@link Gate}: {@code format("dev.delayline.gate.GatedKafkaSource")}
 * with the option {@value #GATE_OPTION} naming the gate. Reading only: a micro-batch
 * stream, nothing else.
 */
public final class GatedKafkaSource implements TableProvider {
  /** The option naming the gate ({@link Gate#named}). */
  public static final String GATE_OPTION = "delayline.gate";
  /**
   * The option saying how long a trigger that finds the gate closed waits for it to open
   * (milliseconds; default 0, no wait): see {@link Gate#admits(long)}.
   */
  public static final String WAIT_OPTION = "delayline.gate.wait.ms";

  private static final String KAFKA = "org.apache.spark.sql.kafka010.KafkaSourceProvider";

  private final TableProvider kafka;

  public GatedKafkaSource() {
    try {
      // spark.jars (the Kafka connector among them) are on the context class loader; this
      // class may sit on the JVM's own class path (extraClassPath), below it.
      ClassLoader loader = Thread.currentThread().getContextClassLoader();
      Class<?> provider = Class.forName(KAFKA, true, loader != null ? loader : getClass().getClassLoader());
      kafka = (TableProvider) provider.getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("Spark's Kafka source is not on the class path", e);
    }
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return kafka.inferSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(properties);
    String name = options.get(GATE_OPTION);
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("option " + GATE_OPTION + " (the gate's name) is required");
    }
    long waitMs = options.getLong(WAIT_OPTION, 0L);
    if (waitMs < 0) {
      throw new IllegalArgumentException("option " + WAIT_OPTION + " must be >= 0, not " + waitMs);
    }
    SupportsRead table = (SupportsRead) kafka.getTable(schema, partitioning, properties);
    return new GatedTable(table, Gate.named(name), waitMs);
  }

  private record GatedTable(SupportsRead kafka, Gate gate, long waitMs) implements SupportsRead {
    @Override
    public String name() {
      return kafka.name();
    }

    @Override
    public Column[] columns() {
      return kafka.columns();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Set.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder builder = kafka.newScanBuilder(options);
      return () -> new GatedScan(builder.build(), gate, waitMs);
    }
  }

  private record GatedScan(Scan kafka, Gate gate, long waitMs) implements Scan {
    @Override
    public StructType readSchema() {
      return kafka.readSchema();
    }

    @Override
    public String description() {
      return kafka.description();
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new GatedKafkaStream(kafka.toMicroBatchStream(checkpointLocation), gate, waitMs);
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return kafka.supportedCustomMetrics();
    }
  }
}
