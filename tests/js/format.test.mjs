// Unit tests of the admin page's pure helpers (format.js), run by `node --test tests/js/`.
import { describe, test } from "node:test";
import assert from "node:assert/strict";

import {
  bucketLabel,
  bytesFromBase64,
  esc,
  hexdump,
  isoToUtcInput,
  parseHeaders,
  prettyJson,
  relative,
  utcInputToIso,
  when,
} from "../../src/delayline/admin/static/format.js";

describe("esc", () => {
  test("escapes the characters that matter in HTML text and attributes", () => {
    assert.equal(esc(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });
  test("shows null and undefined as nothing, numbers as text", () => {
    assert.equal(esc(null), "");
    assert.equal(esc(undefined), "");
    assert.equal(esc(0), "0");
  });
});

describe("when", () => {
  test("shows an API time in UTC to the second", () => {
    assert.equal(when("2030-01-01T12:00:00.750000Z"), "2030-01-01 12:00:00 UTC");
    assert.equal(when("2030-01-01T12:00:00Z"), "2030-01-01 12:00:00 UTC");
  });
  test("shows no time as nothing", () => {
    assert.equal(when(null), "");
    assert.equal(when(""), "");
  });
});

describe("relative", () => {
  const now = Date.parse("2030-01-01T12:00:00Z");
  test("picks the unit by distance, rounding to whole units", () => {
    assert.equal(relative("2030-01-01T12:00:30Z", now), "in 30 s");
    assert.equal(relative("2030-01-01T12:05:00Z", now), "in 5 min");
    assert.equal(relative("2030-01-01T15:00:00Z", now), "in 3 h");
    assert.equal(relative("2030-01-03T12:00:00Z", now), "in 2 d");
  });
  test("speaks of the past as ago", () => {
    assert.equal(relative("2030-01-01T11:59:58Z", now), "2 s ago");
    assert.equal(relative("2029-12-31T12:00:00Z", now), "1 d ago");
  });
  test("counts the due instant itself as to come", () => {
    assert.equal(relative("2030-01-01T12:00:00Z", now), "in 0 s");
  });
});

describe("bytesFromBase64", () => {
  test("decodes to the exact bytes, non-text included", () => {
    assert.deepEqual(Array.from(bytesFromBase64("AP/+IGI=")), [0x00, 0xff, 0xfe, 0x20, 0x62]);
  });
  test("gives no bytes for an empty or missing value", () => {
    assert.equal(bytesFromBase64("").length, 0);
    assert.equal(bytesFromBase64(null).length, 0);
  });
});

describe("hexdump", () => {
  test("shows offset, hex and printable ASCII, 16 bytes a line", () => {
    const bytes = Uint8Array.from([...Buffer.from("0123456789abcdef"), 0x00, 0x7f]);
    const lines = hexdump(bytes).split("\n");
    assert.equal(lines.length, 2);
    assert.equal(lines[0], "00000000  30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66  0123456789abcdef");
    assert.equal(lines[1], `00000010  ${"00 7f".padEnd(47)}  ..`);
  });
  test("says so when there are no bytes", () => {
    assert.equal(hexdump(new Uint8Array()), "(empty)");
  });
});

describe("prettyJson", () => {
  test("indents valid JSON by two spaces", () => {
    assert.equal(prettyJson('{"order":42,"items":[1]}'), '{\n  "order": 42,\n  "items": [\n    1\n  ]\n}');
  });
  test("gives null for text that is not JSON", () => {
    assert.equal(prettyJson("{not json"), null);
  });
});

describe("utcInputToIso", () => {
  test("reads every form a datetime-local value takes as UTC, to the millisecond", () => {
    assert.equal(utcInputToIso("2030-01-01T12:00"), "2030-01-01T12:00:00.000Z");
    assert.equal(utcInputToIso("2030-01-01T12:00:07"), "2030-01-01T12:00:07.000Z");
    assert.equal(utcInputToIso("2030-01-01T12:00:07.750"), "2030-01-01T12:00:07.750Z");
    assert.equal(utcInputToIso("2030-01-01T12:00:07.75"), "2030-01-01T12:00:07.750Z");
    assert.equal(utcInputToIso("2030-01-01T12:00:07.001"), "2030-01-01T12:00:07.001Z");
  });
  test("gives nothing for an empty value", () => {
    assert.equal(utcInputToIso(""), "");
  });
  test("leaves other text for the API to judge", () => {
    assert.equal(utcInputToIso("tomorrow"), "tomorrowZ");
  });
});

describe("isoToUtcInput", () => {
  test("keeps the milliseconds of an API time", () => {
    assert.equal(isoToUtcInput("2030-01-01T12:00:00.750000Z"), "2030-01-01T12:00:00.750");
    assert.equal(isoToUtcInput("2030-01-01T12:00:00.001000Z"), "2030-01-01T12:00:00.001");
    assert.equal(isoToUtcInput("2030-01-01T12:00:00Z"), "2030-01-01T12:00:00.000");
  });
  test("shows a time given with another offset in UTC", () => {
    assert.equal(isoToUtcInput("2030-01-01T13:00:00.250+01:00"), "2030-01-01T12:00:00.250");
  });
  test("gives nothing for no time or an invalid one", () => {
    assert.equal(isoToUtcInput(null), "");
    assert.equal(isoToUtcInput(undefined), "");
    assert.equal(isoToUtcInput("soon"), "");
  });
});

describe("due time through the edit form", () => {
  // The API answers with microseconds (pydantic), drops a zero fraction, and wants the
  // due time back; the browser may shorten the input's value (no zero parts).
  const shortened = (v) => v.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "").replace(/(T\d\d:\d\d):00$/, "$1");
  const dueTimes = [
    ["2030-01-01T12:00:00.750000Z", Date.UTC(2030, 0, 1, 12, 0, 0, 750)],
    ["2030-01-01T12:00:00.001000Z", Date.UTC(2030, 0, 1, 12, 0, 0, 1)],
    ["2030-01-01T12:00:59.999000Z", Date.UTC(2030, 0, 1, 12, 0, 59, 999)],
    ["2030-01-01T12:00:00.500000Z", Date.UTC(2030, 0, 1, 12, 0, 0, 500)],
    ["2030-01-01T12:00:00Z", Date.UTC(2030, 0, 1, 12, 0, 0, 0)],
    ["2030-01-01T12:00:07Z", Date.UTC(2030, 0, 1, 12, 0, 7, 0)],
    ["9999-12-31T23:59:59.999000Z", 253_402_300_799_999],
  ];
  for (const [iso, dueMs] of dueTimes) {
    test(`an unchanged form saves ${iso} to the millisecond`, () => {
      const shown = isoToUtcInput(iso);
      assert.equal(Date.parse(utcInputToIso(shown)), dueMs);
      assert.equal(Date.parse(utcInputToIso(shortened(shown))), dueMs);
    });
  }
});

describe("parseHeaders", () => {
  test("splits each line at its first =", () => {
    assert.deepEqual(parseHeaders("trace=a=b\nsource=ui"), [
      { name: "trace", value: "a=b" },
      { name: "source", value: "ui" },
    ]);
  });
  test("skips blank lines, trims lines, and gives a bare name an empty value", () => {
    assert.deepEqual(parseHeaders("  flag  \n\n x=1 \n"), [
      { name: "flag", value: "" },
      { name: "x", value: "1" },
    ]);
  });
  test("gives no headers for no text", () => {
    assert.deepEqual(parseHeaders(""), []);
    assert.deepEqual(parseHeaders(null), []);
  });
});

describe("bucketLabel", () => {
  const bounds = [100, 250, 1000, 1500, 10000];
  test("labels a bucket by its upper bound, in ms below a second, s from one", () => {
    assert.equal(bucketLabel(bounds, 0), "≤100ms");
    assert.equal(bucketLabel(bounds, 1), "≤250ms");
    assert.equal(bucketLabel(bounds, 2), "≤1s");
    assert.equal(bucketLabel(bounds, 3), "≤1.5s");
  });
  test("labels the overflow bucket by the last bound", () => {
    assert.equal(bucketLabel(bounds, bounds.length), ">10s");
  });
});
