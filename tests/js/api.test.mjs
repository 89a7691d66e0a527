// Unit tests of api.js's pure helper, run by `node --test tests/js/`.
import { test } from "node:test";
import assert from "node:assert/strict";

import { query } from "../../src/delayline/admin/static/api.js";

test("query leaves out empty, null and undefined parameters", () => {
  assert.equal(query({ id: "a", reason: "", cursor: null, limit: undefined }), "?id=a");
});

test("query gives nothing when no parameter is set", () => {
  assert.equal(query({}), "");
  assert.equal(query({ id: "" }), "");
});

test("query encodes values and keeps zero", () => {
  assert.equal(query({ id: "a b&c", due_from: "2030-01-01T12:00:00.750Z", limit: 0 }),
    "?id=a+b%26c&due_from=2030-01-01T12%3A00%3A00.750Z&limit=0");
});
