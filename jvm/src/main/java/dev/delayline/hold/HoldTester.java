package dev.delayline.hold;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TwsTester;
import org.apache.spark.util.ManualClock;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Test support: runs {@link HoldProcessor} (or {@link BucketGate}) through Spark's own
 * {@code TwsTester}, one
 * micro-batch at a time, for the shared hold suite.
 *
 * <p>Spark runs a batch's input rows first and then the timers due at the same batch
 * time; {@code TwsTester}'s public calls fire timers only when time moves forward, before
 * any input. So this sets the tester's clock and fires its timers itself (private
 * members, read by reflection: this class is for tests only).
 */
public final class HoldTester {
  private final TwsTester<Row, Row, Row> tester;
  private final ManualClock clock;
  private final Method expire;
  private final Map<String, Row> keys = new TreeMap<>();
  private final String stateName;

  /**
   * @param maxLatenessMs as for {@link HoldProcessor}
   * @param leadMs as for {@link HoldProcessor}
   */
  public HoldTester(long maxLatenessMs, long leadMs) throws ReflectiveOperationException {
    this(new HoldProcessor(maxLatenessMs, leadMs), "schedule");
  }

  /** A tester of a {@link HoldProcessor} that raises bursts early (arguments as for it). */
  public static HoldTester bursts(long maxLatenessMs, long leadMs, long burstLeadMs, int dense)
      throws ReflectiveOperationException {
    return new HoldTester(new HoldProcessor(maxLatenessMs, leadMs, burstLeadMs, dense), "schedule");
  }

  /** A tester of a {@link HoldProcessor} under notice rules (arguments as for it). */
  public static HoldTester notice(long maxLatenessMs, long leadMs, String noticeRules)
      throws ReflectiveOperationException {
    return new HoldTester(
        new HoldProcessor(maxLatenessMs, leadMs, 0, Integer.MAX_VALUE, noticeRules), "schedule");
  }

  /** A tester of the bucket hold's {@link BucketGate} (arguments as for it). */
  public static HoldTester gate(long maxLatenessMs, long leadMs)
      throws ReflectiveOperationException {
    return new HoldTester(new BucketGate(maxLatenessMs, leadMs), "version");
  }

  private HoldTester(StatefulProcessor<Row, Row, Row> processor, String stateName)
      throws ReflectiveOperationException {
    this.stateName = stateName;
    tester =
        new TwsTester<>(
            processor,
            CollectionConverters.asScala(new ArrayList<scala.Tuple2<Row, Object>>()).toList(),
            TimeMode.ProcessingTime(),
            OutputMode.Append(),
            Option.empty());
    Field field = TwsTester.class.getDeclaredField("processingTimeClock");
    field.setAccessible(true);
    clock = (ManualClock) field.get(tester);
    expire = TwsTester.class.getDeclaredMethod("handleExpiredTimers");
    expire.setAccessible(true);
  }

  /**
   * One micro-batch at {@code nowMs}: the parsed rows of each key (keys in order), then
   * the timers due.
   *
   * @return the events, as a frame of the event schema
   */
  public Dataset<Row> batch(Dataset<Row> parsed, long nowMs) throws ReflectiveOperationException {
    clock.setTime(nowMs);
    Map<String, List<Row>> groups = new TreeMap<>();
    for (Row row : parsed.collectAsList()) {
      String name = key(row.getAs("topic"), row.getAs("gkey"));
      groups.computeIfAbsent(name, n -> new ArrayList<>()).add(row);
    }
    List<Row> out = new ArrayList<>();
    for (Map.Entry<String, List<Row>> group : groups.entrySet()) {
      Row key = keys.get(group.getKey());
      out.addAll(
          CollectionConverters.asJava(
              tester.test(key, CollectionConverters.asScala(group.getValue()).toList())));
    }
    try {
      @SuppressWarnings("unchecked")
      scala.collection.immutable.List<Row> fired =
          (scala.collection.immutable.List<Row>) expire.invoke(tester);
      out.addAll(CollectionConverters.asJava(fired));
    } catch (InvocationTargetException e) {
      throw new IllegalStateException(e.getCause());
    }
    return parsed.sparkSession().createDataFrame(out, Schemas.EVENT);
  }

  /** The offset of the version held for a key, or -1 when none is. */
  public long heldOffset(String topic, byte[] gkey) {
    String name = key(topic, gkey);
    Row key = keys.get(name);
    if (key == null) {
      return -1;
    }
    Option<Row> state = tester.peekValueState(stateName, key);
    return state.isDefined() ? state.get().getLong(2) : -1;
  }

  /** A stable name for a key; the same {@link Row} object stands for it every time. */
  private String key(String topic, byte[] gkey) {
    String name = topic + "/" + HexFormat.of().formatHex(gkey);
    keys.computeIfAbsent(name, n -> RowFactory.create(topic, gkey));
    return name;
  }
}
