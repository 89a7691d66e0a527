"""The admin page's retries: a retrying consumer group's counts by source topic, its dead
letters, and a redrive of the chosen ones (the API alone over fresh topics, no pipeline)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from playwright.sync_api import Browser, Page, expect

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.client import ClientConfig
from delayline.client.consumer import Retries, RetryConfig, ensure_retry_topics
from delayline.client.retry import SOURCE_TOPIC
from delayline.contract import ConsumedRecord
from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.reader import read_topic
from tests.browser.conftest import SHOTS, TOKEN, opened_page
from tests.browser.test_admin import sign_in
from tests.support import eventually


class DeclinedError(Exception):
    pass


@pytest.fixture
def group(kafka_bootstrap: str) -> str:
    return f"billing-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def retries_page(
    browser: Browser, kafka_bootstrap: str, group: str, tmp_path: Path
) -> Iterator[Page]:
    schedules = create_topic(
        kafka_bootstrap, unique_topic("sched"), config={"cleanup.policy": "compact"}
    )
    server = ApiServer(
        ApiConfig(
            topology=Topology(kafka_bootstrap, (schedules,), history_topic=None),
            catalog_path=tmp_path / "catalog.db",
            port=0,
            token=TOKEN,
            retry_groups=(group,),
        )
    )
    client = ClientConfig(kafka_bootstrap, schedules)
    config = RetryConfig(group, not_retryable=(DeclinedError,))
    ensure_retry_topics(client, config, partitions=1)
    retries = Retries(client, config)
    for offset in (3, 4):
        record = ConsumedRecord("orders", 0, offset, 0, b"k", b"order %d" % offset, ())
        retries.failed(record, DeclinedError(f"card {offset} declined"))
    retries.flush()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(config.retry_topic, value=b"x", headers=[(SOURCE_TOPIC, b"orders")])
    producer.flush(10)
    url = server.start()
    try:
        # The page reads /retries once: wait until the watch has counted everything.
        eventually(lambda: _counts(url) == (1, 2), 30, "the retry watch counted the group's topics")
        with opened_page(browser, url, "retries") as page:
            yield page
    finally:
        server.stop()


def _counts(url: str) -> tuple[int, int]:
    """The watched group's retries and dead letters, as ``GET /retries`` has them."""
    (group,) = httpx.get(f"{url}/retries", headers={"Authorization": f"Bearer {TOKEN}"}).json()[
        "groups"
    ]
    sources = group["sources"]
    return sum(s["retries"] for s in sources), sum(
        n for s in sources for n in s["dead_letters"].values()
    )


def test_a_groups_dead_letters_are_shown_and_one_is_redriven_once(
    retries_page: Page, kafka_bootstrap: str, group: str
) -> None:
    page = retries_page
    sign_in(page)
    page.get_by_role("link", name="Retries").click()
    row = page.locator("tr", has_text=group)
    expect(row.get_by_test_id("dead-count")).to_have_text("2", timeout=15_000)
    expect(row.get_by_test_id("retry-count")).to_have_text("1")
    expect(row).to_contain_text("orders")
    expect(row).to_contain_text("not-retryable 2")
    page.get_by_role("link", name=group).click()
    expect(page.get_by_test_id("rdl-reason")).to_have_text(["not-retryable", "not-retryable"])
    expect(page.locator("tbody")).to_contain_text("card 4 declined")
    page.locator("tr", has_text="card 3 declined").get_by_role("checkbox").check()
    page.get_by_role("button", name="Redrive chosen").click()
    expect(page.get_by_test_id("flash")).to_have_text("Redriven: 1.")
    expect(
        page.locator("tr", has_text="card 3 declined").get_by_test_id("rdl-redriven")
    ).to_have_text("redriven")
    expect(page.locator("tr", has_text="card 3 declined").get_by_role("checkbox")).to_be_disabled()
    page.screenshot(path=str(SHOTS / "retries-dead-letters.png"), full_page=True)
    back = [r for r in read_topic(kafka_bootstrap, f"{group}-retry") if r.value == b"order 3"]
    assert len(back) == 1
