// Unit tests of the page's delivery-window and pacing helpers (pacing.js), run by `node --test tests/js/`.
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import {
  MAX_WINDOW_MS,
  delayText,
  pacingRows,
  parseDurationMs,
  windowBody,
  windowText,
} from "../../src/delayline/admin/static/pacing.js";

describe("parseDurationMs", () => {
  test("reads durations as delayline does", () => {
    assert.equal(parseDurationMs("15m"), 900_000);
    assert.equal(parseDurationMs("1h30m"), 5_400_000);
    assert.equal(parseDurationMs("1500ms"), 1500);
    assert.equal(parseDurationMs(" 1.5S "), 1500);
    assert.equal(parseDurationMs("90"), 90_000);
    assert.equal(parseDurationMs("1 m 30 s"), 90_000);
  });
  test("gives null for anything else", () => {
    for (const text of ["", "soon", "15 minutes", "-5m", "m", "5x", "1h 2", null, undefined]) {
      assert.equal(parseDurationMs(text), null, String(text));
    }
  });
});

describe("windowBody", () => {
  test("adds window_ms for a duration, nothing for a blank field", () => {
    assert.deepEqual(windowBody("15m"), { window_ms: 900_000 });
    assert.deepEqual(windowBody("1h"), { window_ms: MAX_WINDOW_MS });
    assert.deepEqual(windowBody("1ms"), { window_ms: 1 });
    assert.deepEqual(windowBody("  "), {});
    assert.deepEqual(windowBody(null), {});
  });
  test("refuses what is no duration, and a window outside 1ms..1h, saying what to type", () => {
    assert.throws(() => windowBody("soon"), /Delivery window "soon": write a duration such as 30s, 15m or 1h/);
    assert.throws(() => windowBody("2h"), /Delivery window must be within 1ms\.\.1h, not 2h/);
    assert.throws(() => windowBody("0s"), /not 0s/);
  });
});

describe("windowText", () => {
  test("says what the window does", () => {
    assert.equal(windowText(900_000), "15m: delivered from its due time to 15m after, spread evenly (never early)");
    assert.equal(windowText(1500), "1s500ms: delivered from its due time to 1s500ms after, spread evenly (never early)");
  });
  test("gives nothing without a window", () => {
    assert.equal(windowText(null), "");
    assert.equal(windowText(undefined), "");
  });
});

describe("delayText", () => {
  test("milliseconds, tenths of seconds, then whole units", () => {
    assert.equal(delayText(0), "0 ms");
    assert.equal(delayText(349.6), "350 ms");
    assert.equal(delayText(1234), "1.2 s");
    assert.equal(delayText(125_000), "2m5s");
  });
});

describe("pacingRows", () => {
  const progress = (pacing) => ({ last_batch: null, committers: { group: "g", this: { name: "c0", pacing } } });

  test("one row per paced target topic, by name: rate, held back, average and longest delay, queued", () => {
    const rows = pacingRows(progress({
      orders: { rate_per_s: 2000, held: 4, delay_ms: 5000, max_delay_ms: 2500, queued: 12_345 },
      campaign: { rate_per_s: null, held: 0, delay_ms: 0, max_delay_ms: 0, queued: 0 },
      slow: { rate_per_s: 0.5, held: 1, delay_ms: 90_000, max_delay_ms: 90_000, queued: 3 },
    }));
    assert.deepEqual(rows, [
      { topic: "campaign", rate: "window only", held: "0", average: "–", longest: "–", queued: "0" },
      { topic: "orders", rate: "2,000/s", held: "4", average: "1.3 s", longest: "2.5 s", queued: "12,345" },
      { topic: "slow", rate: "0.5/s", held: "1", average: "1m30s", longest: "1m30s", queued: "3" },
    ]);
  });
  test("none when nothing is paced, no committer answers or the pipeline is away", () => {
    assert.deepEqual(pacingRows(progress({})), []);
    assert.deepEqual(pacingRows({ last_batch: null, committers: { this: { name: "c0" } } }), []);
    assert.deepEqual(pacingRows({ last_batch: null, spark: null }), []);
    assert.deepEqual(pacingRows(null), []);
    assert.deepEqual(pacingRows(undefined), []);
  });
});
