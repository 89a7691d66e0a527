package dev.delayline.examples;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.util.backoff.FixedBackOff;

/**
 * Spring Kafka: a listener container whose {@link DefaultErrorHandler} does not retry in
 * place ({@code FixedBackOff(0, 0)}) but hands the failed record to a recoverer that sends
 * it to delayline (or the dead-letter topic) and waits for the acknowledgement; the
 * container then commits its offset and moves on.
 *
 * <p>Arguments: as {@link PlainConsumer}'s.
 */
public final class SpringConsumer {
  public static void main(String[] args) throws InterruptedException {
    String bootstrap = args[0];
    DelaylineRetry retry = new DelaylineRetry(args[3], args[1], 1_000, 3);
    KafkaProducer<byte[], byte[]> producer = PlainConsumer.producer(bootstrap);
    Work work = new Work(producer, args[4]);
    Map<String, Object> props = new HashMap<>();
    PlainConsumer.consumerProps(bootstrap, args[3]).forEach((k, v) -> props.put((String) k, v));
    ContainerProperties container = new ContainerProperties(args[2], retry.retryTopic());
    container.setMessageListener((MessageListener<byte[], byte[]>) work::handle);
    KafkaMessageListenerContainer<byte[], byte[]> listener =
        new KafkaMessageListenerContainer<>(new DefaultKafkaConsumerFactory<>(props), container);
    listener.setCommonErrorHandler(new DefaultErrorHandler((record, exception) -> {
      Throwable cause = exception.getCause() != null ? exception.getCause() : exception;
      @SuppressWarnings("unchecked")
      ConsumerRecord<byte[], byte[]> failed = (ConsumerRecord<byte[], byte[]>) record;
      try {
        producer.send(retry.failed(failed, cause, Work.retryable(cause))).get();
      } catch (Exception e) {
        throw new IllegalStateException("could not hand the record to delayline", e);
      }
    }, new FixedBackOff(0L, 0L)));
    listener.start();
    System.out.println("consuming");
    Thread.currentThread().join();
  }
}
