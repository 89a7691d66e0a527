// Unit tests of the page's recurring/group/pause helpers (recurrence.js), run by `node --test tests/js/`.
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import {
  catchUpText,
  durationText,
  endText,
  groupMessage,
  groupSettled,
  inZone,
  isOwnHeader,
  occurrenceText,
  recurrenceBody,
  recurrenceFields,
  rowMarkers,
} from "../../src/delayline/admin/static/recurrence.js";

describe("recurrenceBody", () => {
  test("gives none without a cron expression or a rate: a one-off", () => {
    assert.equal(recurrenceBody({}), null);
    assert.equal(recurrenceBody({ cron: "  ", every: "", time_zone: "Europe/Berlin", catch_up: "all", until: "2030-01-01T00:00" }), null);
  });
  test("sends a cron expression with its zone and catch-up, trimmed", () => {
    assert.deepEqual(recurrenceBody({ cron: " 0 9 * * 1-5 ", every: "", time_zone: " Europe/Berlin ", catch_up: "latest",
      catch_up_window: "", until: "", max_occurrences: "" }),
    { cron: "0 9 * * 1-5", time_zone: "Europe/Berlin", catch_up: "latest" });
  });
  test("reads a blank zone as UTC", () => {
    assert.deepEqual(recurrenceBody({ every: "15m", time_zone: "" }), { every: "15m", time_zone: "UTC" });
    assert.deepEqual(recurrenceBody({ every: "15m", time_zone: null }), { every: "15m", time_zone: "UTC" });
  });
  test("reads until as UTC and the maximum as a number", () => {
    assert.deepEqual(recurrenceBody({ every: "1h", until: "2030-12-31T23:00", max_occurrences: "10", catch_up_window: "5m" }),
      { every: "1h", time_zone: "UTC", until: "2030-12-31T23:00:00.000Z", max_occurrences: 10, catch_up_window: "5m" });
  });
  test("sends both rules and a maximum that is no whole number as typed, for the API to judge", () => {
    assert.deepEqual(recurrenceBody({ cron: "* * * * *", every: "1m", max_occurrences: "2.5" }),
      { cron: "* * * * *", every: "1m", time_zone: "UTC", max_occurrences: "2.5" });
  });
});

describe("durationText", () => {
  test("writes a duration the API reads back exactly", () => {
    assert.equal(durationText(900_000), "15m");
    assert.equal(durationText(5_400_000), "1h30m");
    assert.equal(durationText(90_061_000), "1d1h1m1s");
    assert.equal(durationText(1_500), "1s500ms");
    assert.equal(durationText(250), "250ms");
    assert.equal(durationText(0), "0s");
  });
  test("gives nothing for no duration", () => {
    assert.equal(durationText(null), "");
    assert.equal(durationText(undefined), "");
  });
});

describe("recurrenceFields", () => {
  test("fills the form from a schedule's recurrence, default window left blank", () => {
    assert.deepEqual(recurrenceFields({ rule: "every 15m", cron: null, every_ms: 900_000, time_zone: "UTC",
      until: "2030-12-31T23:00:00Z", max_occurrences: 10, catch_up: "all", catch_up_window_ms: 60_000 }),
    { cron: "", every: "15m", time_zone: "UTC", catch_up: "all", catch_up_window: "", until: "2030-12-31T23:00:00.000", max_occurrences: "10" });
  });
  test("keeps a cron expression, its zone and another window", () => {
    const f = recurrenceFields({ cron: "0 9 * * 1-5", every_ms: null, time_zone: "Europe/Berlin", until: null,
      max_occurrences: null, catch_up: "none", catch_up_window_ms: 300_000 });
    assert.equal(f.cron, "0 9 * * 1-5");
    assert.equal(f.every, "");
    assert.equal(f.time_zone, "Europe/Berlin");
    assert.equal(f.catch_up_window, "5m");
    assert.equal(f.until, "");
    assert.equal(f.max_occurrences, "");
  });
  test("gives empty fields, UTC and latest for a one-off", () => {
    assert.deepEqual(recurrenceFields(null), { cron: "", every: "", time_zone: "UTC", catch_up: "latest", catch_up_window: "", until: "", max_occurrences: "" });
  });
  test("round-trips through recurrenceBody", () => {
    const recurring = { cron: null, every_ms: 5_400_000, time_zone: "Asia/Tokyo", until: "2031-01-01T00:00:00.250000Z",
      max_occurrences: 3, catch_up: "none", catch_up_window_ms: 1_500 };
    assert.deepEqual(recurrenceBody(recurrenceFields(recurring)), { every: "1h30m", time_zone: "Asia/Tokyo", catch_up: "none",
      catch_up_window: "1s500ms", until: "2031-01-01T00:00:00.250Z", max_occurrences: 3 });
  });
});

describe("isOwnHeader", () => {
  test("keeps delayline's own headers out of the editable ones", () => {
    for (const name of ["scheduler-epoch", "scheduler-target-topic", "delayline-cron", "delayline-every", "delayline-time-zone",
      "delayline-until", "delayline-max-occurrences", "delayline-catch-up", "delayline-catch-up-window",
      "delayline-occurrence", "delayline-group", "delayline-paused", "delayline-window"]) {
      assert.equal(isOwnHeader(name), true, name);
    }
  });
  test("leaves the user's headers editable", () => {
    assert.equal(isOwnHeader("trace"), false);
    assert.equal(isOwnHeader("delayline-trace"), false);
  });
});

describe("rowMarkers", () => {
  test("marks a recurring row with its rule as the title", () => {
    assert.deepEqual(rowMarkers({ recurrence: "cron 0 9 * * 1-5 in Europe/Berlin", paused: false }),
      [{ kind: "recurring", label: "↻ recurring", title: "cron 0 9 * * 1-5 in Europe/Berlin" }]);
  });
  test("marks a paused row with the due time it had", () => {
    assert.deepEqual(rowMarkers({ recurrence: null, paused: true, paused_due_at: "2030-01-01T12:00:00Z" }),
      [{ kind: "paused", label: "paused", title: "was due 2030-01-01 12:00:00 UTC" }]);
  });
  test("marks a refused recurrence as such, paused too", () => {
    assert.deepEqual(rowMarkers({ recurrence: "refused: unknown time zone 'Mars/Base'", paused: true, paused_due_at: null }).map((m) => m.kind),
      ["refused", "paused"]);
  });
  test("gives no marker to a plain one-off", () => {
    assert.deepEqual(rowMarkers({ recurrence: null, paused: false }), []);
    assert.deepEqual(rowMarkers({}), []);
  });
});

describe("inZone and occurrenceText", () => {
  test("shows 09:00 Berlin as CET in winter and CEST in summer", () => {
    assert.equal(inZone("2030-01-07T08:00:00Z", "Europe/Berlin"), "Mon 2030-01-07 09:00:00");
    assert.equal(inZone("2030-07-01T07:00:00Z", "Europe/Berlin"), "Mon 2030-07-01 09:00:00");
  });
  test("shows midnight as 00, not 24", () => {
    assert.equal(inZone("2030-01-01T00:00:00Z", "UTC"), "Tue 2030-01-01 00:00:00");
  });
  test("gives null for a zone or a time it does not know", () => {
    assert.equal(inZone("2030-01-01T00:00:00Z", "Mars/Base"), null);
    assert.equal(inZone("soon", "UTC"), null);
  });
  test("shows an occurrence in its zone and in UTC", () => {
    assert.equal(occurrenceText("2030-01-07T08:00:00Z", "Europe/Berlin"), "Mon 2030-01-07 09:00:00 Europe/Berlin · 2030-01-07 08:00:00 UTC");
  });
  test("shows UTC once for UTC, or for a zone this browser does not know", () => {
    assert.equal(occurrenceText("2030-01-07T08:00:00.000000Z", "UTC"), "2030-01-07 08:00:00 UTC");
    assert.equal(occurrenceText("2030-01-07T08:00:00Z", "Mars/Base"), "2030-01-07 08:00:00 UTC");
  });
});

describe("catchUpText and endText", () => {
  test("say what becomes of missed occurrences, with the window", () => {
    assert.equal(catchUpText("latest", 60_000), "latest: only the newest missed occurrence is delivered (missed when over 1m late)");
    assert.equal(catchUpText("none", 90_000), "none: missed occurrences are skipped (missed when over 1m30s late)");
  });
  test("say where the series ends", () => {
    assert.equal(endText({ until: null, max_occurrences: null }), "never");
    assert.equal(endText({ until: null, max_occurrences: 10 }), "after occurrence 10");
    assert.equal(endText({ until: "2030-12-31T00:00:00Z", max_occurrences: null }), "after 2030-12-31 00:00:00 UTC");
    assert.equal(endText({ until: "2030-12-31T00:00:00Z", max_occurrences: 10 }), "after occurrence 10 or 2030-12-31 00:00:00 UTC");
  });
});

describe("groupMessage", () => {
  test("says what was done to how many schedules of which group", () => {
    assert.equal(groupMessage("pause", { group: "reports", schedules: 3, records: [] }), "paused 3 schedule(s) of group reports");
    assert.equal(groupMessage("resume", { group: "reports", schedules: 1, records: [] }), "resumed 1 schedule(s) of group reports");
    assert.equal(groupMessage("cancel", { group: "g", schedules: 0, records: [] }), "cancelled 0 schedule(s) of group g");
  });
});

describe("groupSettled", () => {
  const records = [{ id: "a" }, { id: "b" }];
  test("a pause shows once every schedule written is listed paused", () => {
    assert.equal(groupSettled("pause", records, [{ id: "a", paused: true }, { id: "b", paused: false }]), false);
    assert.equal(groupSettled("pause", records, [{ id: "a", paused: true }]), false);
    assert.equal(groupSettled("pause", records, [{ id: "a", paused: true }, { id: "b", paused: true }, { id: "c", paused: false }]), true);
  });
  test("a resume shows once none is paused (one cancelled by its catch-up policy is gone)", () => {
    assert.equal(groupSettled("resume", records, [{ id: "a", paused: false }, { id: "b", paused: true }]), false);
    assert.equal(groupSettled("resume", records, [{ id: "a", paused: false }]), true);
  });
  test("a cancel shows once none is listed", () => {
    assert.equal(groupSettled("cancel", records, [{ id: "b", paused: false }]), false);
    assert.equal(groupSettled("cancel", records, [{ id: "c", paused: false }]), true);
  });
  test("nothing written is settled at once", () => {
    assert.equal(groupSettled("pause", [], [{ id: "a", paused: false }]), true);
  });
});
