// Formatting helpers: every time is shown in UTC, as the API speaks it.
export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

export function when(iso) {
  if (!iso) return "";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC");
}

export function relative(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  const abs = Math.abs(ms);
  const unit = abs < 60e3 ? [1e3, "s"] : abs < 3600e3 ? [60e3, "min"] : abs < 86400e3 ? [3600e3, "h"] : [86400e3, "d"];
  const n = Math.round(abs / unit[0]);
  return ms >= 0 ? `in ${n} ${unit[1]}` : `${n} ${unit[1]} ago`;
}

export function bytesFromBase64(b64) {
  const raw = atob(b64 || "");
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

export function hexdump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join("\n") || "(empty)";
}

export function prettyJson(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return null; }
}

// datetime-local inputs carry no zone: this page reads and writes them as UTC.
// Due times are whole milliseconds: both directions keep them, or saving an unchanged
// form would move a schedule earlier by its sub-second part.

/**
 * The ISO 8601 due time the API takes for a datetime-local value read as UTC.
 *
 * @param {string} value The input's value: `YYYY-MM-DDTHH:MM`, optionally with `:SS`
 *     and a fraction of one to three digits (browsers drop zero parts).
 * @returns {string} `YYYY-MM-DDTHH:MM:SS.sssZ`; "" for an empty value.
 */
export function utcInputToIso(value) {
  if (!value) return "";
  const m = /^(\d{4,}-\d{2}-\d{2}T\d{2}:\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(value);
  // Not a form value: sent as typed, so the API answers with its reason.
  if (!m) return `${value}Z`;
  return `${m[1]}:${m[2] ?? "00"}.${(m[3] ?? "").padEnd(3, "0")}Z`;
}

/**
 * The datetime-local value showing an API time in UTC, to the millisecond.
 *
 * @param {string | null | undefined} iso An ISO 8601 time with a zone, as the API
 *     answers (e.g. `2030-01-01T12:00:00.750000Z`).
 * @returns {string} `YYYY-MM-DDTHH:MM:SS.sss`; "" when there is no (valid) time.
 */
export function isoToUtcInput(iso) {
  const ms = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(ms) ? "" : new Date(ms).toISOString().slice(0, 23);
}

/**
 * Parses the form's extra headers: one `name=value` per line, split at the first
 * `=` (values may hold more); a line without `=` is a header with an empty value.
 *
 * @param {string} text The textarea's content.
 * @returns {{name: string, value: string}[]} The headers, blank lines skipped.
 */
export function parseHeaders(text) {
  return String(text ?? "").split("\n").map((l) => l.trim()).filter(Boolean)
    .map((l) => { const i = l.indexOf("="); return i < 0 ? { name: l, value: "" } : { name: l.slice(0, i), value: l.slice(i + 1) }; });
}

/**
 * Label of a lateness histogram bucket: `≤bound`, or `>last bound` for the overflow.
 *
 * @param {number[]} bounds Upper bounds of the buckets, milliseconds, ascending.
 * @param {number} i The bucket's index; `bounds.length` is the overflow bucket.
 * @returns {string} e.g. `≤250ms`, `≤1.5s`, `>10s`.
 */
export function bucketLabel(bounds, i) {
  const fmt = (ms) => (ms >= 1000 ? `${ms / 1000}s` : `${ms}ms`);
  return i < bounds.length ? `≤${fmt(bounds[i])}` : `>${fmt(bounds[bounds.length - 1])}`;
}
