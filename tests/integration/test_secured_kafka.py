"""delayline's librdkafka clients against a secured broker (TLS, SASL, mutual TLS, ACLs),
configured from Java client properties files as a user has them."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from delayline.dev.oidc import OidcProvider
from delayline.dev.testing import unique_topic
from delayline.infra.broker import LocalBroker
from delayline.infra.broker_security import MTLS_SUBJECT, OAUTH, secrets_of
from delayline.kafka.acls import GROUP, TOPIC, Acl, apply_acls
from delayline.kafka.config import check
from delayline.kafka.properties import (
    KafkaConfigError,
    librdkafka_settings,
    read_properties,
    spark_options,
)


def settings_of(path: Path, **java: str) -> dict[str, Any]:
    """librdkafka's settings for the Java properties file ``path`` (with ``java`` keys
    changed), as every delayline client gets them."""
    props = {**read_properties(path), **java}
    return {"bootstrap.servers": props["bootstrap.servers"], **librdkafka_settings(props)}


def admin_of(broker: LocalBroker) -> AdminClient:
    return AdminClient(settings_of(broker.secure_files.admin_properties))


def new_topic(broker: LocalBroker, principal: str | None = None) -> str:
    """A topic made by the admin; ``principal`` may write and read it."""
    name = unique_topic("secured")
    admin = admin_of(broker)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    if principal:
        ops = ("Read", "Write", "Describe")
        apply_acls(admin, [Acl(TOPIC, name, "literal", ops, "test")], principal)
    return name


def round_trip(settings: dict[str, Any], topic: str) -> bytes:
    """Write one record to ``topic`` and read it back; its value."""
    producer = Producer({**settings, "acks": "all"})
    errors: list[Any] = []
    for _ in range(20):  # ACLs reach the broker's authorizer a moment after they are made
        errors.clear()
        producer.produce(topic, b"hello", b"k", on_delivery=lambda err, _m: errors.append(err))
        producer.flush(30)
        if errors == [None]:
            break
        time.sleep(0.5)
    assert errors == [None], str(errors)
    consumer = Consumer({**settings, "group.id": f"delayline-test-{topic}",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                return bytes(msg.value() or b"")
    finally:
        consumer.close()
    raise AssertionError("nothing read back")


def refused_write(settings: dict[str, Any], topic: str) -> str:
    """Write one record to ``topic``, expecting a refusal; the error's name."""
    producer = Producer({**settings, "acks": "all", "message.timeout.ms": 30_000})
    errors: list[Any] = []
    try:
        producer.produce(topic, b"no", b"k", on_delivery=lambda err, _m: errors.append(err))
        producer.flush(40)
    except KafkaException as exc:
        return str(exc.args[0].name())
    assert errors, "the write was neither refused nor acknowledged"
    assert errors[0] is not None, "the write was accepted"
    return str(errors[0].name())


def group_acl(broker: LocalBroker, principal: str) -> None:
    acl = Acl(GROUP, "delayline-test-", "prefixed", ("Read", "Describe"), "test")
    apply_acls(admin_of(broker), [acl], principal)


def test_scram_sha_512_over_tls_with_hostname_verification(secured_broker: LocalBroker) -> None:
    files = secured_broker.secure_files
    settings = settings_of(files.delayline_properties)
    assert settings["ssl.endpoint.identification.algorithm"] == "https"
    group_acl(secured_broker, "User:delayline")
    assert round_trip(settings, new_topic(secured_broker, "User:delayline")) == b"hello"


def test_sasl_plain_over_tls(secured_broker: LocalBroker) -> None:
    files = secured_broker.secure_files
    password = secrets_of(files)["delayline"]
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="delayline" password="{password}";'
    )
    settings = settings_of(files.delayline_properties, **{"sasl.mechanism": "PLAIN",
                                                          "sasl.jaas.config": jaas})  # fmt: skip
    group_acl(secured_broker, "User:delayline")
    assert round_trip(settings, new_topic(secured_broker, "User:delayline")) == b"hello"


def test_a_wrong_password_is_refused(secured_broker: LocalBroker) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="delayline" password="wrong";'
    )
    settings = settings_of(secured_broker.secure_files.delayline_properties,
                           **{"sasl.jaas.config": jaas})  # fmt: skip
    assert_authentication_fails(settings)


def assert_authentication_fails(settings: dict[str, Any]) -> None:
    """A client of ``settings`` cannot list the topics: its authentication failed."""
    errors: list[KafkaError] = []
    with_callback: dict[str, Any] = {**settings, "error_cb": errors.append}
    admin = AdminClient(with_callback)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)  # authentication fails well before
    admin.poll(1)  # serves the error callback
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}, errors


def oidc_properties(broker: LocalBroker, oidc: OidcProvider, client_id: str, path: Path) -> Path:
    """A Java client file for OAUTHBEARER as an OIDC user writes it (Kafka 3.4+), for
    ``client_id`` registered with ``oidc``."""
    secret = oidc.register(client_id)
    jaas = f'{OAUTH} required clientId="{client_id}" clientSecret="{secret}" scope="kafka";'
    props = {
        "bootstrap.servers": broker.config.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(broker.secure_files.ca_pem),
    }  # fmt: skip
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def test_oauthbearer_tokens_from_an_oidc_provider(
    secured_broker: LocalBroker, oidc: OidcProvider, tmp_path: Path
) -> None:
    """librdkafka fetches a token with the client credentials; the broker verifies it
    with the provider's key set and authorises the token's subject by its ACLs."""
    client = "delayline-oidc"
    config = oidc_properties(secured_broker, oidc, client, tmp_path / "oidc.properties")
    topic = new_topic(secured_broker, f"User:{client}")
    group_acl(secured_broker, f"User:{client}")
    before = oidc.issued[client]
    assert round_trip(settings_of(config), topic) == b"hello"
    assert oidc.issued[client] > before  # the token came from the provider
    # Another subject's token is authenticated but not authorised on the topic.
    stranger = oidc_properties(secured_broker, oidc, "stranger", tmp_path / "stranger.properties")
    assert refused_write(settings_of(stranger), topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert oidc.issued["stranger"] >= 1


def assert_refused(broker: LocalBroker, provider: OidcProvider, path: Path) -> None:
    """A client with ``provider``'s tokens fetches one and fails authentication."""
    assert_authentication_fails(
        settings_of(oidc_properties(broker, provider, "delayline-oidc", path))
    )
    assert provider.issued["delayline-oidc"] >= 1  # a token was fetched, and refused


def test_a_token_another_key_signed_is_refused(secured_broker: LocalBroker, tmp_path: Path) -> None:
    """A provider the broker does not trust (another signing key, the same claims): its
    tokens fail authentication."""
    with OidcProvider(tmp_path / "untrusted") as untrusted:
        assert_refused(secured_broker, untrusted, tmp_path / "u.properties")


def test_a_token_for_another_audience_is_refused(
    secured_broker: LocalBroker, oidc: OidcProvider, tmp_path: Path
) -> None:
    """The trusted provider's token, issued for another service (``aud``), is refused."""
    audience = oidc.audience
    oidc.audience = "another-service"
    try:
        assert_refused(secured_broker, oidc, tmp_path / "a.properties")
    finally:
        oidc.audience = audience


def test_sparks_kafka_source_logs_in_with_oauthbearer(
    secured_broker: LocalBroker, oidc: OidcProvider, spark: Any, tmp_path: Path
) -> None:
    """The Java client of Spark's Kafka source, with the same file as its options (as
    ``delayline run --kafka-config`` gives them), fetches its own token and reads."""
    client = "delayline-oidc-java"
    config = oidc_properties(secured_broker, oidc, client, tmp_path / "oidc.properties")
    topic = new_topic(secured_broker, f"User:{client}")
    producer = Producer(settings_of(secured_broker.secure_files.admin_properties))
    producer.produce(topic, b"from-admin")
    assert producer.flush(30) == 0
    props = read_properties(config)
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", props["bootstrap.servers"])
        .options(**spark_options(props))
        .option("subscribe", topic)
        .load()
        .select("value")
        .collect()
    )
    assert b"from-admin" in [bytes(r.value) for r in rows]
    assert oidc.issued[client] >= 1


def test_mutual_tls_with_pkcs12_stores_is_the_certificate_subject(
    secured_broker: LocalBroker,
) -> None:
    """The client's PKCS12 keystore as it is; its PKCS12 truststore read into PEM; the
    principal is the certificate's subject: allowed where its ACL says, refused elsewhere."""
    settings = settings_of(secured_broker.secure_files.mtls_properties)
    assert settings["ssl.keystore.location"].endswith("client.p12")
    assert settings["ssl.ca.location"].endswith(".pem")
    group_acl(secured_broker, f"User:{MTLS_SUBJECT}")
    topic = new_topic(secured_broker, f"User:{MTLS_SUBJECT}")
    assert round_trip(settings, topic) == b"hello"
    forbidden = new_topic(secured_broker)
    producer = Producer({**settings, "acks": "all"})
    errors: list[Any] = []
    producer.produce(forbidden, b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_jks_truststore_is_read_through_keytool(
    secured_broker: LocalBroker, tmp_path: Path
) -> None:
    files = secured_broker.secure_files
    jks = tmp_path / "trust.jks"
    subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(files.ca_pem),
         "-keystore", str(jks), "-storetype", "JKS", "-storepass:env", "PW"],
        env={**os.environ, "PW": "changeit"}, check=True, capture_output=True,
    )  # fmt: skip
    settings = settings_of(
        files.delayline_properties,
        **{"ssl.truststore.type": "JKS", "ssl.truststore.location": str(jks),
           "ssl.truststore.password": "changeit"},
    )  # fmt: skip
    pem = Path(settings["ssl.ca.location"])
    assert pem.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert pem.stat().st_mode & 0o077 == 0, "the converted store is the owner's only"
    AdminClient(settings).list_topics(timeout=30)  # the TLS handshake verifies the broker
    with pytest.raises(KafkaConfigError, match="keytool could not read it"):
        librdkafka_settings({"ssl.truststore.location": str(jks),
                             "ssl.truststore.password": "wrong"})  # fmt: skip


def test_an_unknown_client_property_is_refused_by_name(secured_broker: LocalBroker) -> None:
    settings = settings_of(secured_broker.secure_files.delayline_properties)
    with pytest.raises(KafkaConfigError, match=r"key\.serializer"):
        check({**settings, "key.serializer": "org.apache.kafka.StringSerializer"}, "f")
