package dev.delayline.examples;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.util.Arrays;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * What a consumer writes for a record it failed on, by delayline's retry contract
 * (docs/retry.md): a schedule to delayline's schedules topic that delivers the record to
 * the group's retry topic after an exponential backoff, or, for an error that may not be
 * retried or attempts used up, a dead letter to the group's dead-letter topic.
 */
public final class DelaylineRetry {
  private final String group;
  private final String schedulesTopic;
  private final long initialDelayMs;
  private final int maxAttempts;

  /**
   * @param group the consumer group: its retry topic is {@code <group>-retry}, its dead
   *     letters go to {@code <group>-dlt}
   * @param schedulesTopic delayline's schedules topic
   * @param initialDelayMs the first retry's delay; each next one doubles it
   * @param maxAttempts the most retries; a record is tried at most {@code 1 + maxAttempts} times
   */
  public DelaylineRetry(String group, String schedulesTopic, long initialDelayMs, int maxAttempts) {
    this.group = group;
    this.schedulesTopic = schedulesTopic;
    this.initialDelayMs = initialDelayMs;
    this.maxAttempts = maxAttempts;
  }

  public String retryTopic() {
    return group + "-retry";
  }

  public String deadLetterTopic() {
    return group + "-dlt";
  }

  /** The attempt {@code record} is: 1 the first time, its {@code retry-attempt} + 1 after. */
  public static int attemptOf(ConsumerRecord<byte[], byte[]> record) {
    return (int) number(record.headers(), "retry-attempt", 0) + 1;
  }

  /** The record to send for {@code record}, which failed with {@code error}. */
  public ProducerRecord<byte[], byte[]> failed(
      ConsumerRecord<byte[], byte[]> record, Throwable error, boolean retryable) {
    long now = System.currentTimeMillis();
    Headers seen = record.headers();
    int retries = (int) number(seen, "retry-attempt", 0);
    String sourceTopic = text(seen, "retry-source-topic", record.topic());
    long sourcePartition = number(seen, "retry-source-partition", record.partition());
    long sourceOffset = number(seen, "retry-source-offset", record.offset());
    boolean again = retryable && retries < maxAttempts;
    ProducerRecord<byte[], byte[]> out;
    if (again) {
      long due = now + Math.min(initialDelayMs << Math.min(retries, 30), 3_600_000L);
      String id = "retry/" + group + "/" + record.topic() + "/" + record.partition() + "/"
          + record.offset();
      // A null value would be a cancel on the schedules topic: it comes back empty.
      byte[] value = record.value() == null ? new byte[0] : record.value();
      out = new ProducerRecord<>(schedulesTopic, id.getBytes(UTF_8), value);
      out.headers()
          .add("scheduler-epoch", String.format("%d.%03d", due / 1000, due % 1000).getBytes(UTF_8))
          .add("scheduler-target-topic", retryTopic().getBytes(UTF_8));
      if (record.key() != null) {
        out.headers().add("scheduler-target-key", record.key());
      }
    } else {
      out = new ProducerRecord<>(deadLetterTopic(), record.key(), record.value());
      out.headers().add("retry-topic", retryTopic().getBytes(UTF_8));
    }
    for (Header header : seen) {  // the record's own headers, in order
      String name = header.key();
      if (!name.startsWith("scheduler-") && !name.startsWith("delayline-")
          && !name.startsWith("retry-")) {
        out.headers().add(header);
      }
    }
    String message = String.valueOf(error.getMessage());
    byte[] messageBytes = message.getBytes(UTF_8);
    if (messageBytes.length > 1024) {
      messageBytes = Arrays.copyOf(messageBytes, 1024);  // a real one cuts on a character
    }
    out.headers()
        .add("retry-attempt", Integer.toString(again ? retries + 1 : retries).getBytes(UTF_8))
        .add("retry-original-timestamp",
            Long.toString(number(seen, "retry-original-timestamp", now)).getBytes(UTF_8))
        .add("retry-error-class", error.getClass().getName().getBytes(UTF_8))
        .add("retry-error-message", messageBytes)
        .add("retry-source-topic", sourceTopic.getBytes(UTF_8))
        .add("retry-source-partition", Long.toString(sourcePartition).getBytes(UTF_8))
        .add("retry-source-offset", Long.toString(sourceOffset).getBytes(UTF_8))
        .add("retry-group", group.getBytes(UTF_8));
    if (!again) {
      out.headers().add("retry-dead-reason",
          (retryable ? "exhausted" : "not-retryable").getBytes(UTF_8));
    }
    return out;
  }

  private static long number(Headers headers, String name, long otherwise) {
    Header last = headers.lastHeader(name);
    if (last == null || last.value() == null) {
      return otherwise;
    }
    try {
      return Long.parseLong(new String(last.value(), UTF_8));
    } catch (NumberFormatException e) {
      return otherwise;
    }
  }

  private static String text(Headers headers, String name, String otherwise) {
    Header last = headers.lastHeader(name);
    return last == null || last.value() == null ? otherwise : new String(last.value(), UTF_8);
  }
}
