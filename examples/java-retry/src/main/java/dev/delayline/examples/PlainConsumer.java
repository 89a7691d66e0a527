package dev.delayline.examples;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A plain {@link KafkaConsumer} that retries later through delayline: what it fails on
 * goes to delayline (or the dead-letter topic) and the partition moves on; a batch's
 * retries are acknowledged before its offsets are committed (at least once: a crash in
 * between reads them again, and a retry written again with its id replaces itself).
 *
 * <p>Arguments: bootstrap servers, delayline's schedules topic, the source topic, the
 * consumer group, the done topic.
 */
public final class PlainConsumer {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    DelaylineRetry retry = new DelaylineRetry(args[3], args[1], 1_000, 3);
    try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap);
        KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, args[3])) {
      Work work = new Work(producer, args[4]);
      consumer.subscribe(List.of(args[2], retry.retryTopic()));
      System.out.println("consuming");
      while (true) {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          try {
            work.handle(record);
          } catch (RuntimeException e) {
            sent.add(producer.send(retry.failed(record, e, Work.retryable(e))));
          }
        }
        for (Future<RecordMetadata> one : sent) {
          one.get();  // a retry Kafka refused throws here: the offsets stay uncommitted
        }
        consumer.commitSync();
      }
    }
  }

  static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("enable.idempotence", "true");
    props.put("acks", "all");
    props.put("key.serializer", ByteArraySerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    return new KafkaProducer<>(props);
  }

  static Properties consumerProps(String bootstrap, String group) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    props.put("group.id", group);
    props.put("enable.auto.commit", "false");
    props.put("auto.offset.reset", "earliest");
    props.put("isolation.level", "read_committed");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    return props;
  }

  private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group) {
    return new KafkaConsumer<>(consumerProps(bootstrap, group));
  }
}
