package dev.delayline.examples;

import static java.nio.charset.StandardCharsets.UTF_8;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The examples' handler. A record's value says how it fares: {@code fail-N:<id>} fails
 * (an {@link IllegalStateException}, retryable) until its attempt N, {@code dead:<id>}
 * fails with an {@link IllegalArgumentException} (not retryable), anything else
 * succeeds. A success writes {@code <id>,<attempt>,<now ms>} to the done topic.
 */
final class Work {
  private final Producer<byte[], byte[]> producer;
  private final String doneTopic;

  Work(Producer<byte[], byte[]> producer, String doneTopic) {
    this.producer = producer;
    this.doneTopic = doneTopic;
  }

  void handle(ConsumerRecord<byte[], byte[]> record) {
    String value = record.value() == null ? "" : new String(record.value(), UTF_8);
    int attempt = DelaylineRetry.attemptOf(record);
    String id = value.substring(value.indexOf(':') + 1);
    if (value.startsWith("dead:")) {
      throw new IllegalArgumentException("record " + id + " can never succeed");
    }
    if (value.startsWith("fail-")) {
      int succeedsOn = Integer.parseInt(value.substring(5, value.indexOf(':')));
      if (attempt < succeedsOn) {
        throw new IllegalStateException("record " + id + " failed on attempt " + attempt);
      }
    }
    String done = id + "," + attempt + "," + System.currentTimeMillis();
    producer.send(new ProducerRecord<>(doneTopic, id.getBytes(UTF_8), done.getBytes(UTF_8)));
  }

  /** Whether a failure may be retried: anything but a bad argument. */
  static boolean retryable(Throwable error) {
    return !(error instanceof IllegalArgumentException);
  }
}
