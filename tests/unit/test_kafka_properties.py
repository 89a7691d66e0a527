"""The Java client properties file and its translation to librdkafka (pure, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delayline.kafka.config import check
from delayline.kafka.properties import (
    KafkaConfigError,
    librdkafka_settings,
    parse_jaas,
    parse_properties,
    redacted,
    spark_options,
)

SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="delayline" password="s3cr\\"et=;x";'
)


def test_java_properties_format() -> None:
    text = "\n".join(
        [
            "# a comment",
            "! another",
            "   security.protocol = SASL_SSL",
            "sasl.mechanism:SCRAM-SHA-512",
            "client.id delayline-1",
            "long.value=first \\",
            "    second",
            "escaped\\=key=a\\tb\\u0041",
            "empty=",
            "",
        ]
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "client.id": "delayline-1",
        "long.value": "first second",
        "escaped=key": "a\tbA",
        "empty": "",
    }


def test_jaas_options_with_quotes_escapes_and_separators() -> None:
    module, options = parse_jaas(SCRAM)
    assert module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert options == {"username": "delayline", "password": 's3cr"et=;x'}


@pytest.mark.parametrize(
    "text",
    ['PlainLoginModule required username="a"', "X optional username", 'X sometimes a="b";'],
)
def test_malformed_jaas_is_refused(text: str) -> None:
    with pytest.raises(KafkaConfigError, match=r"sasl\.jaas\.config"):
        parse_jaas(text)


def test_scram_over_tls_with_a_pem_truststore(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    settings = librdkafka_settings(
        {
            "bootstrap.servers": "ignored:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
            "client.id": "passes-through",
        }
    )
    assert settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "delayline",
        "sasl.password": 's3cr"et=;x',
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https",
        "client.id": "passes-through",
    }


def test_hostname_verification_off_only_when_asked() -> None:
    base = {"security.protocol": "SSL"}
    assert librdkafka_settings(base)["ssl.endpoint.identification.algorithm"] == "https"
    off = librdkafka_settings({**base, "ssl.endpoint.identification.algorithm": ""})
    assert off["ssl.endpoint.identification.algorithm"] == "none"
    assert "ssl.endpoint.identification.algorithm" not in librdkafka_settings({})
    with pytest.raises(KafkaConfigError, match="only 'https'"):
        librdkafka_settings({**base, "ssl.endpoint.identification.algorithm": "ldap"})


def test_inline_pem_stores_and_pem_keystore(tmp_path: Path) -> None:
    key = tmp_path / "client.pem"
    key.write_text("key and chain")
    inline = librdkafka_settings(
        {
            "ssl.truststore.certificates": "CA",
            "ssl.keystore.key": "KEY",
            "ssl.keystore.certificate.chain": "CHAIN",
            "ssl.key.password": "kp",
        }
    )
    assert inline == {"ssl.ca.pem": "CA", "ssl.key.pem": "KEY", "ssl.certificate.pem": "CHAIN",
                      "ssl.key.password": "kp"}  # fmt: skip
    pem = librdkafka_settings({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(key)})
    assert pem == {"ssl.key.location": str(key), "ssl.certificate.location": str(key)}


def test_oauthbearer_needs_a_token_endpoint() -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="app" clientSecret="shh" scope="kafka";'
    )
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
             "sasl.jaas.config": jaas}  # fmt: skip
    with pytest.raises(KafkaConfigError, match=r"token\.endpoint\.url"):
        librdkafka_settings(props)
    url = "https://idp.example/token"
    settings = librdkafka_settings({**props, "sasl.oauthbearer.token.endpoint.url": url})
    assert settings["sasl.oauthbearer.method"] == "oidc"
    assert settings["sasl.oauthbearer.token.endpoint.url"] == url
    assert (settings["sasl.oauthbearer.client.id"], settings["sasl.oauthbearer.client.secret"],
            settings["sasl.oauthbearer.scope"]) == ("app", "shh", "kafka")  # fmt: skip


def test_a_java_oidc_client_file_is_carried_whole() -> None:
    """What a Kafka 3.4+ user writes for OIDC: the login callback handler, extensions and
    Java's login tuning. librdkafka's OIDC method is the same flow; the tuning is Java's."""
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="app" clientSecret="shh" extension_logicalCluster="lkc-1" '
        'extension_identityPoolId="pool-2";'
    )
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.login.connect.timeout.ms": "15000",
        "sasl.oauthbearer.sub.claim.name": "client_id",
    }  # fmt: skip
    settings = librdkafka_settings(props)
    assert settings["sasl.oauthbearer.extensions"] == "logicalCluster=lkc-1,identityPoolId=pool-2"
    assert settings["sasl.oauthbearer.client.id"] == "app"
    assert not {k for k in settings if k.startswith(("sasl.login.", "sasl.oauthbearer.sub"))}
    check(settings, "client.properties")  # librdkafka knows every key left
    older = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
    assert librdkafka_settings({**props, "sasl.login.callback.handler.class": older}) == settings
    scram = {**props, "sasl.mechanism": "SCRAM-SHA-512"}
    with pytest.raises(KafkaConfigError, match=r"sasl\.login\.callback\.handler\.class"):
        librdkafka_settings(scram)  # the OIDC login only goes with OAUTHBEARER
    other = {**props, "sasl.login.callback.handler.class": "com.example.MyLogin"}
    with pytest.raises(KafkaConfigError, match=r"sasl\.login\.callback\.handler\.class"):
        librdkafka_settings(other)


def test_an_oauth_option_librdkafka_cannot_take_is_refused_by_name() -> None:
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="app" clientSecret="shh" unsecuredLoginStringClaim_sub="me";'
    )
    props = {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas,
             "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}  # fmt: skip
    with pytest.raises(KafkaConfigError, match="unsecuredLoginStringClaim_sub"):
        librdkafka_settings(props)


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("sasl.login.callback.handler.class", "Java class"),
        ("ssl.cipher.suites", "cipher suites"),
        ("ssl.enabled.protocols", "TLS version"),
    ],
)
def test_keys_librdkafka_cannot_carry_are_refused_by_name(key: str, why: str) -> None:
    with pytest.raises(KafkaConfigError, match=f"{key}.*{why}"):
        librdkafka_settings({key: "x"}, "client.properties")


def test_kerberos_and_mismatched_mechanisms_are_refused() -> None:
    krb = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true principal="x";'
    with pytest.raises(KafkaConfigError, match="Krb5LoginModule"):
        librdkafka_settings({"sasl.jaas.config": krb})
    with pytest.raises(KafkaConfigError, match=r"sasl\.mechanism is GSSAPI"):
        librdkafka_settings({"sasl.mechanism": "GSSAPI", "sasl.jaas.config": SCRAM})


def test_a_missing_store_file_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "nope.p12"
    with pytest.raises(KafkaConfigError, match=r"ssl.truststore.location=.*no such file"):
        librdkafka_settings({"ssl.truststore.location": str(gone), "ssl.truststore.type": "PKCS12"})


def test_spark_takes_the_java_keys_and_secrets_are_redacted() -> None:
    props = {"bootstrap.servers": "b:1", "sasl.jaas.config": SCRAM, "ssl.keystore.password": "p",
             "ssl.keystore.key": "KEY", "security.protocol": "SASL_SSL"}  # fmt: skip
    assert spark_options(props) == {
        "kafka.sasl.jaas.config": SCRAM,
        "kafka.ssl.keystore.password": "p",
        "kafka.ssl.keystore.key": "KEY",
        "kafka.security.protocol": "SASL_SSL",
    }
    shown = redacted({**librdkafka_settings({"sasl.jaas.config": SCRAM}), **props})
    assert "s3cr" not in repr(shown)
    assert "KEY" not in repr(shown)
    assert shown["security.protocol"] == "SASL_SSL"
