"""The admin page in a real browser, against the real API and pipeline."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid

import httpx
from confluent_kafka import Producer
from playwright.sync_api import Page, expect

from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector
from tests.browser.conftest import SHOTS, TOKEN, CannedStack, Stack

CATALOG_WAIT_MS = 15_000
NOTHING = "\u2013"  # an en dash: what the page shows for no figure


def sign_in(page: Page) -> None:
    page.goto("/ui/")
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Use token").click()
    expect(page.get_by_test_id("flash")).to_have_text("Token saved in this browser.")


def create(page: Page, schedule_id: str, target: str, delay_s: int, payload: str) -> None:
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Id").fill(schedule_id)
    page.get_by_label("Target topic").fill(target)
    page.get_by_label("…or due in (seconds)").fill(str(delay_s))
    page.get_by_label("Payload (UTF-8 text)").fill(payload)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Written to")
    # The page shows the schedule once the catalog has it.
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)


def row_in_list(page: Page, schedule_id: str, *, present: bool) -> None:
    """Search the list until the catalog shows (or no longer shows) the id."""
    page.goto(f"/ui/#/schedules?id={schedule_id}")
    expect(page.get_by_role("heading", name="Pending schedules")).to_be_visible()
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    row = page.locator(f'[data-testid=schedule-row][data-id="{schedule_id}"]')
    while (row.count() > 0) != present:
        assert time.monotonic() < deadline, f"{schedule_id} present={present} not seen"
        page.get_by_role("button", name="Apply").click()
        page.wait_for_timeout(300)
    if present:
        expect(row).to_be_visible()
    else:
        expect(page.get_by_test_id("no-schedules")).to_be_visible()


def test_create_see_pending_cancel_and_see_it_gone(page: Page, stack: Stack) -> None:
    schedule_id = f"ui-{uuid.uuid4().hex[:8]}"
    sign_in(page)
    create(page, schedule_id, stack.pipeline.target(), 3600, '{"order": 42}')
    row_in_list(page, schedule_id, present=True)
    page.screenshot(path=str(SHOTS / "schedules-list.png"))

    page.get_by_role("link", name=schedule_id).click()
    expect(page.get_by_test_id("state")).to_have_text("pending")
    expect(page.get_by_test_id("payload")).to_contain_text('"order": 42')  # pretty JSON
    page.get_by_role("button", name="HEX").click()
    expect(page.get_by_test_id("payload")).to_contain_text("7b 22 6f 72")
    page.screenshot(path=str(SHOTS / "schedule-detail.png"), full_page=True)

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel schedule").click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Cancel of {schedule_id} written")
    row_in_list(page, schedule_id, present=False)


def test_schedule_due_in_five_seconds_is_delivered(page: Page, stack: Stack) -> None:
    schedule_id = f"ui-fire-{uuid.uuid4().hex[:8]}"
    target = stack.pipeline.target()
    sign_in(page)
    with DeliveryCollector(stack.pipeline.bootstrap, [target]) as seen:
        create(page, schedule_id, target, 5, "hello from the page")
        delivered = seen.wait_for(lambda d: len(d) >= 1, timeout_s=40)
    assert [d.value for d in delivered] == [b"hello from the page"]
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    fired = page.get_by_test_id("versions").locator(".tag.fired")
    while fired.count() == 0:
        assert time.monotonic() < deadline, "fired version not shown"
        page.reload()
        page.wait_for_timeout(500)
    expect(page.get_by_test_id("state")).to_have_text("not pending")
    expect(fired).to_have_count(1)


def test_dashboard_shows_figures_and_status(page: Page, stack: Stack) -> None:
    answer = page.goto("/ui/")
    assert answer is not None
    policy = answer.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy, answer.headers  # the page runs under its CSP
    assert answer.headers.get("x-frame-options") == "DENY"
    expect(page.get_by_test_id("pending-count")).to_have_text(re.compile(r"^\d+$"))
    # The charts' bars are sized through the CSSOM, which the policy allows (an inline
    # style attribute would be refused, and the page fixture fails on the refusal).
    bar = page.locator(".chart .b").first
    expect(bar).to_have_attribute("style", re.compile(r"height: [0-9.]+%"))
    expect(page.get_by_test_id("pipeline-status")).to_contain_text("running", timeout=20_000)
    page.screenshot(path=str(SHOTS / "dashboard.png"), full_page=True)
    page.keyboard.press("/")  # the search shortcut opens the list with the search focused
    expect(page.locator("#search")).to_be_focused()


def test_bad_input_shows_the_apis_reason(page: Page, stack: Stack) -> None:
    sign_in(page)
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Target topic").fill("not a topic!")
    page.get_by_label("…or due in (seconds)").fill("10")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_test_id("flash")).to_contain_text("not a valid topic name")


def test_editing_a_binary_schedule_keeps_its_bytes(page: Page, stack: Stack) -> None:
    schedule_id = f"ui-bin-{uuid.uuid4().hex[:8]}"
    raw = b"\x00\xff\xfe binary"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    created = httpx.post(
        f"{stack.url}/schedules",
        headers=auth,
        json={
            "id": schedule_id,
            "target_topic": stack.pipeline.target(),
            "payload": base64.b64encode(raw).decode(),
            "payload_encoding": "base64",
            "delay_ms": 3_600_000,
        },
    )
    assert created.status_code == 202
    sign_in(page)
    page.goto(f"/ui/#/edit/{schedule_id}")
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    while page.get_by_label("Payload (UTF-8 text)").count() == 0:  # catalog may lag
        assert time.monotonic() < deadline, "edit form not shown"
        page.reload()
        page.wait_for_timeout(300)
    expect(page.get_by_label("Payload (UTF-8 text)")).to_be_disabled()
    page.get_by_label("…or due in (seconds)").fill("7200")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)
    current = httpx.get(f"{stack.url}/schedules/{schedule_id}").json()["current"]
    assert base64.b64decode(current["payload_base64"]) == raw
    assert current["offset"] > created.json()["offset"]  # a new version was written


def test_saving_an_unchanged_form_keeps_the_due_time_to_the_millisecond(
    page: Page, stack: Stack
) -> None:
    schedule_id = f"ui-ms-{uuid.uuid4().hex[:8]}"
    # An hour ahead, on a whole minute plus 750 ms: a form that keeps only whole
    # seconds would save it 750 ms early.
    due_ms = (int(time.time()) // 60 * 60 + 3600) * 1000 + 750
    due_at = ms_to_datetime(due_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    created = httpx.post(
        f"{stack.url}/schedules",
        headers=auth,
        json={"id": schedule_id, "target_topic": stack.pipeline.target(), "due_at": due_at},
    )
    assert created.status_code == 202
    sign_in(page)
    page.goto(f"/ui/#/edit/{schedule_id}")
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    while page.get_by_role("button", name="Save").count() == 0:  # catalog may lag
        assert time.monotonic() < deadline, "edit form not shown"
        page.reload()
        page.wait_for_timeout(300)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Written to")
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)
    current = httpx.get(f"{stack.url}/schedules/{schedule_id}").json()["current"]
    assert current["offset"] > created.json()["offset"]  # the save wrote a new version
    assert current["due_ms"] == due_ms, f"due {due_at} saved as {current['due_at']}"


def test_envelopes_and_timer_requests_are_listed_with_their_contract(
    page: Page, stack: Stack
) -> None:
    """A JSON envelope written by a plain producer is listed as one (the contract filter
    finds it), shown without an Edit button, and cancelled from the page."""
    topics = stack.pipeline.topics
    assert topics.envelopes is not None
    schedule_id = f"ui-env-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": stack.pipeline.bootstrap})
    body = {"topic": stack.pipeline.target(), "message": {"n": 1}, "countdown": 3600,
            "id": schedule_id}  # fmt: skip
    producer.produce(topics.envelopes, json.dumps(body).encode())
    producer.flush(10)
    sign_in(page)
    row_in_list(page, schedule_id, present=True)
    row = page.locator(f'[data-testid=schedule-row][data-id="{schedule_id}"]')
    expect(row.get_by_test_id("contract")).to_have_text("JSON envelope")
    page.get_by_label("Contract").select_option("timer-request")
    page.get_by_role("button", name="Apply").click()
    expect(row).to_have_count(0)
    page.get_by_label("Contract").select_option("envelope")
    page.get_by_role("button", name="Apply").click()
    expect(row).to_be_visible()
    row.get_by_role("link", name=schedule_id).click()
    expect(page.get_by_test_id("detail-contract")).to_contain_text("JSON envelope")
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel schedule").click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Cancel of {schedule_id} written")
    row_in_list(page, schedule_id, present=False)


def test_recurring_schedule_in_a_group_is_paused_resumed_and_cancelled_with_its_group(
    page: Page, stack: Stack
) -> None:
    """A cron schedule read in Europe/Berlin, made through the form with a group: listed
    as recurring in its group, its next occurrences at 09:00 Berlin, paused and resumed
    from its detail, then cancelled with its group from the list."""
    schedule_id = f"ui-cron-{uuid.uuid4().hex[:8]}"
    group = "reports"
    sign_in(page)
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Id").fill(schedule_id)
    page.get_by_label("Target topic").fill(stack.pipeline.target())
    page.get_by_label("Cron expression").fill("0 9 * * 1-5")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Group").fill(group)
    page.get_by_role("button", name="Create").click()  # no due time: it starts now
    expect(page.get_by_test_id("flash")).to_contain_text("Written to")
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)

    page.goto("/ui/#/schedules")
    page.get_by_label("Group").fill(group)
    page.get_by_role("button", name="Apply").click()
    row = page.locator(f'[data-testid=schedule-row][data-id="{schedule_id}"]')
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    while row.count() == 0:
        assert time.monotonic() < deadline, f"{schedule_id} not listed in group {group}"
        page.get_by_role("button", name="Apply").click()
        page.wait_for_timeout(300)
    marker = row.get_by_test_id("marker-recurring")
    expect(marker).to_be_visible()
    expect(marker).to_have_attribute("title", "cron 0 9 * * 1-5 in Europe/Berlin")
    expect(row.get_by_test_id("group")).to_have_text(group)
    expect(page.get_by_test_id("group-actions")).to_be_visible()

    row.get_by_role("link", name=schedule_id).click()
    expect(page.get_by_test_id("rule")).to_have_text("cron 0 9 * * 1-5 in Europe/Berlin")
    expect(page.get_by_test_id("occurrence")).to_have_text("due for occurrence 1")
    expect(page.get_by_test_id("catch-up")).to_contain_text("latest")
    occurrences = page.get_by_test_id("next-occurrences").locator("li")
    expect(occurrences).to_have_count(5)
    nine_in_berlin = re.compile(
        r"^(Mon|Tue|Wed|Thu|Fri) \d{4}-\d\d-\d\d 09:00:00 Europe/Berlin"
        r" · \d{4}-\d\d-\d\d 0[78]:00:00 UTC$"
    )
    for text in occurrences.all_inner_texts():
        assert nine_in_berlin.match(text), text
    page.screenshot(path=str(SHOTS / "recurring-detail.png"), full_page=True)

    page.get_by_role("button", name="Pause", exact=True).click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Pause of {schedule_id} written")
    shown_after_reload(page, "due", "paused (was due")
    expect(page.get_by_test_id("marker-paused")).to_be_visible()
    expect(page.get_by_test_id("next-occurrences").locator("li")).to_have_count(5)

    page.get_by_role("button", name="Resume", exact=True).click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Resume of {schedule_id} written")
    shown_after_reload(page, "due", re.compile(r"^\d{4}-\d\d-\d\d 0[78]:00:00 UTC"))  # due again
    expect(page.get_by_role("button", name="Pause", exact=True)).to_be_visible()
    expect(page.get_by_test_id("marker-paused")).to_have_count(0)

    page.get_by_test_id("group").click()  # the group's link: the list, filtered by it
    expect(page.get_by_label("Group")).to_have_value(group)
    expect(row).to_be_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel group").click()
    expect(page.get_by_test_id("flash")).to_have_text(f"cancelled 1 schedule(s) of group {group}")
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    while row.count() > 0:
        assert time.monotonic() < deadline, f"{schedule_id} still listed in group {group}"
        page.get_by_role("button", name="Apply").click()
        page.wait_for_timeout(300)
    expect(page.get_by_test_id("no-schedules")).to_be_visible()


def shown_after_reload(page: Page, test_id: str, text: str | re.Pattern[str]) -> None:
    """Reload the page until the element shows ``text`` (the catalog follows Kafka)."""
    deadline = time.monotonic() + CATALOG_WAIT_MS / 1000
    element = page.get_by_test_id(test_id)
    while True:
        shown = element.inner_text() if element.count() else ""
        if text.search(shown) if isinstance(text, re.Pattern) else text in shown:
            return
        assert time.monotonic() < deadline, f"{test_id} shows {shown!r}, not {text!r}"
        page.wait_for_timeout(300)
        page.reload()


def test_a_delivery_window_is_set_in_the_form_shown_and_kept_on_edit(
    canned_page: Page, canned_stack: CannedStack
) -> None:
    """The form's Delivery window becomes the schedule's ``window_ms``; its detail says
    so, the edit form shows it (not as an extra header) and saving keeps it; a window
    over an hour is refused by the page before anything is written."""
    page = canned_page
    schedule_id = f"ui-window-{uuid.uuid4().hex[:8]}"
    sign_in(page)
    page.get_by_role("link", name="New schedule").click()
    page.get_by_label("Id").fill(schedule_id)
    page.get_by_label("Target topic").fill("campaign")
    page.get_by_label("…or due in (seconds)").fill("3600")
    page.get_by_label("Delivery window").fill("2h")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_test_id("flash")).to_have_text(
        "Delivery window must be within 1ms..1h, not 2h"
    )
    page.get_by_label("Delivery window").fill("15m")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Written to")
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)
    expect(page.get_by_test_id("window")).to_have_text(
        "15m: delivered from its due time to 15m after, spread evenly (never early)"
    )
    current = httpx.get(f"{canned_stack.url}/schedules/{schedule_id}").json()["current"]
    assert current["window_ms"] == 900_000
    assert {"name": "delayline-window", "value": "15m", "encoding": "utf-8"} in current["headers"]
    versions = len(httpx.get(f"{canned_stack.url}/schedules/{schedule_id}").json()["versions"])
    assert versions == 1  # the refused 2h was never written
    page.screenshot(path=str(SHOTS / "window-detail.png"), full_page=True)

    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Delivery window")).to_have_value("15m")
    expect(page.get_by_label("Extra headers, one name=value per line")).to_have_value("")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Written to")
    expect(page.get_by_test_id("state")).to_have_text("pending", timeout=CATALOG_WAIT_MS)
    expect(page.get_by_test_id("window")).to_contain_text("15m")
    detail = httpx.get(f"{canned_stack.url}/schedules/{schedule_id}").json()
    assert [v["kind"] for v in detail["versions"]] == ["created", "updated"]
    assert detail["current"]["window_ms"] == 900_000


def test_the_dashboard_shows_delivery_pacing_per_target_topic(
    canned_page: Page, canned_stack: CannedStack
) -> None:
    """The pacing the pipeline's committer reports in ``/progress`` (through the API's
    ``/info``): a table per target topic, none while nothing is paced."""
    page = canned_page
    canned_stack.progress.answer = {"committers": {"group": "g", "this": {"pacing": {}}}}
    page.goto("/ui/")
    expect(page.get_by_test_id("pipeline-status")).to_contain_text("running")
    expect(page.get_by_test_id("pacing")).to_have_count(0)

    canned_stack.progress.answer = {
        "committers": {
            "group": "g",
            "this": {
                "name": "c0",
                "partitions": [0, 1],
                "pending": 12,
                "delivered": 40_000,
                "pacing": {
                    "orders": {
                        "rate_per_s": 2000.0,
                        "held": 4,
                        "delay_ms": 5000,
                        "max_delay_ms": 2500,
                        "queued": 12_345,
                    },
                    "campaign": {
                        "rate_per_s": None,
                        "held": 0,
                        "delay_ms": 0,
                        "max_delay_ms": 0,
                        "queued": 0,
                    },
                },
            },
            "members": [],
        }
    }
    page.reload()
    table = page.get_by_test_id("pacing")
    expect(table).to_be_visible()
    rows = table.get_by_test_id("pacing-row")
    expect(rows).to_have_count(2)
    expect(table.locator("th")).to_have_text(
        ["Target topic", "Rate", "Held back", "Average added delay", "Longest delay", "Queued now"]
    )
    expect(rows.nth(0).locator("td")).to_have_text(
        ["campaign", "window only", "0", NOTHING, NOTHING, "0"]
    )
    expect(rows.nth(1).locator("td")).to_have_text(
        ["orders", "2,000/s", "4", "1.3 s", "2.5 s", "12,345"]
    )
    page.screenshot(path=str(SHOTS / "dashboard-pacing.png"), full_page=True)
