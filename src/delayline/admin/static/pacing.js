// Delivery windows and per-target pacing: the page's pure helpers (no DOM, no fetch).
import { durationText } from "./recurrence.js";

/** The longest delivery window delayline takes (contract/pacing.py MAX_WINDOW_MS). */
export const MAX_WINDOW_MS = 3_600_000;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration as delayline reads one: plain seconds (`90`) or units ms, s, m, h, d
 * (`1h30m`, `1500ms`, `1.5s`), case and spaces ignored.
 *
 * @param {string | null | undefined} text As typed.
 * @returns {number | null} Whole milliseconds; null for anything else (a sign included).
 */
export function parseDurationMs(text) {
  const cleaned = String(text ?? "").trim().toLowerCase().replace(/ /g, "");
  if (/^\d+(\.\d+)?$/.test(cleaned)) return Math.round(Number(cleaned) * 1000);
  const parts = [...cleaned.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (!cleaned || parts.map((p) => p[0]).join("") !== cleaned) return null;
  return Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]], 0));
}

/**
 * What the form's delivery window adds to an API body.
 *
 * @param {string | null | undefined} text The field as typed.
 * @returns {{window_ms?: number}} Nothing for a blank field.
 * @throws {Error} Not a duration, or outside 1ms..1h: the message says what to type.
 */
export function windowBody(text) {
  if (!String(text ?? "").trim()) return {};
  const ms = parseDurationMs(text);
  if (ms === null) throw new Error(`Delivery window ${JSON.stringify(String(text).trim())}: write a duration such as 30s, 15m or 1h`);
  if (ms < 1 || ms > MAX_WINDOW_MS) throw new Error(`Delivery window must be within 1ms..${durationText(MAX_WINDOW_MS)}, not ${durationText(ms)}`);
  return { window_ms: ms };
}

/**
 * A schedule's delivery window in words, for its detail.
 *
 * @param {number | null | undefined} windowMs `window_ms` of the API's schedule.
 * @returns {string} e.g. `15m: delivered from its due time to 15m after, spread evenly`; "" for none.
 */
export function windowText(windowMs) {
  if (!windowMs) return "";
  const text = durationText(windowMs);
  return `${text}: delivered from its due time to ${text} after, spread evenly (never early)`;
}

/**
 * A delay for people: `350 ms`, `1.2 s`, `2m5s`.
 *
 * @param {number} ms Milliseconds (an average may have a fraction).
 * @returns {string}
 */
export function delayText(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return durationText(Math.round(ms / 1000) * 1000);
}

const count = (n) => Number(n ?? 0).toLocaleString("en-US");

/**
 * The rows of the "Delivery pacing" table, one per target topic the committer paces.
 *
 * @param {object | null | undefined} progress `pipeline.progress` of the API's `/info`
 *     (the pipeline's `/progress`): its `committers.this.pacing` maps a target topic to
 *     `{rate_per_s, held, delay_ms, max_delay_ms, queued}`.
 * @returns {{topic: string, rate: string, held: string, average: string, longest: string,
 *     queued: string}[]} By topic; none when nothing is paced (or no committer answers).
 */
export function pacingRows(progress) {
  const pacing = progress?.committers?.this?.pacing;
  if (!pacing || typeof pacing !== "object") return [];
  return Object.keys(pacing).sort().map((topic) => {
    const p = pacing[topic] ?? {};
    const held = Number(p.held ?? 0);
    return {
      topic,
      rate: p.rate_per_s === null || p.rate_per_s === undefined ? "window only" : `${Number(p.rate_per_s).toLocaleString("en-US")}/s`,
      held: count(held),
      average: held > 0 ? delayText(Number(p.delay_ms ?? 0) / held) : "–",
      longest: held > 0 ? delayText(Number(p.max_delay_ms ?? 0)) : "–",
      queued: count(p.queued),
    };
  });
}
