// Recurring schedules, groups and pauses: the page's pure helpers (no DOM, no fetch).
import { when, utcInputToIso, isoToUtcInput } from "./format.js";

// Headers delayline writes from the API's own fields: the form shows the fields, never
// these headers (the API refuses them as extra headers).
const OWN_HEADERS = new Set(["delayline-cron", "delayline-every", "delayline-time-zone", "delayline-until",
  "delayline-max-occurrences", "delayline-catch-up", "delayline-catch-up-window", "delayline-occurrence",
  "delayline-group", "delayline-paused", "delayline-window"]);

/**
 * Whether a stored header is written by delayline itself (control or recurrence).
 *
 * @param {string} name The header's name.
 * @returns {boolean} true for `scheduler-*` and delayline's recurrence, group, pause and
 *     window headers.
 */
export function isOwnHeader(name) {
  return name.startsWith("scheduler-") || OWN_HEADERS.has(name);
}

/**
 * A duration as the API reads it back, exactly: `15m`, `1h30m`, `1s500ms`.
 *
 * @param {number | null | undefined} ms Milliseconds.
 * @returns {string} "" for no duration.
 */
export function durationText(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  if (ms === 0) return "0s";
  let rest = ms;
  let out = "";
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1000], ["ms", 1]]) {
    if (rest >= size) { out += `${Math.floor(rest / size)}${unit}`; rest %= size; }
  }
  return out;
}

/**
 * The `recurrence` of an API body from the form's repeat fields (text as typed).
 *
 * @param {{cron?: string, every?: string, time_zone?: string, catch_up?: string,
 *     catch_up_window?: string, until?: string, max_occurrences?: string}} fields
 *     `until` is a datetime-local value read as UTC.
 * @returns {object | null} null when neither a cron expression nor a rate is given (a
 *     one-off); otherwise only what was given, a blank zone being UTC. What does not
 *     look right is sent as typed, so the API answers with its reason.
 */
export function recurrenceBody(fields) {
  const t = (k) => String(fields[k] ?? "").trim();
  if (!t("cron") && !t("every")) return null;
  const body = { time_zone: t("time_zone") || "UTC" };
  if (t("cron")) body.cron = t("cron");
  if (t("every")) body.every = t("every");
  if (t("catch_up")) body.catch_up = t("catch_up");
  if (t("catch_up_window")) body.catch_up_window = t("catch_up_window");
  if (t("until")) body.until = utcInputToIso(t("until"));
  if (t("max_occurrences")) body.max_occurrences = /^\d+$/.test(t("max_occurrences")) ? Number(t("max_occurrences")) : t("max_occurrences");
  return body;
}

/**
 * The form's repeat fields for a schedule's `recurring` (the inverse of recurrenceBody).
 *
 * @param {object | null | undefined} recurring `current.recurring` of the API's detail.
 * @returns {Record<string, string>} Empty fields (zone UTC, catch-up latest) for none.
 */
export function recurrenceFields(recurring) {
  if (!recurring) return { cron: "", every: "", time_zone: "UTC", catch_up: "latest", catch_up_window: "", until: "", max_occurrences: "" };
  return {
    cron: recurring.cron ?? "",
    every: durationText(recurring.every_ms),
    time_zone: recurring.time_zone || "UTC",
    catch_up: recurring.catch_up || "latest",
    catch_up_window: recurring.catch_up_window_ms === 60_000 ? "" : durationText(recurring.catch_up_window_ms),
    until: isoToUtcInput(recurring.until),
    max_occurrences: recurring.max_occurrences ? String(recurring.max_occurrences) : "",
  };
}

/**
 * The small markers of a list row: recurring (its rule as the title), paused.
 *
 * @param {{recurrence?: string | null, paused?: boolean, paused_due_at?: string | null}} s
 *     A `ScheduleSummary`.
 * @returns {{kind: string, label: string, title: string}[]}
 */
export function rowMarkers(s) {
  const out = [];
  if (s.recurrence) {
    const refused = s.recurrence.startsWith("refused:");
    out.push(refused
      ? { kind: "refused", label: "recurrence refused", title: s.recurrence }
      : { kind: "recurring", label: "↻ recurring", title: s.recurrence });
  }
  if (s.paused) out.push({ kind: "paused", label: "paused", title: s.paused_due_at ? `was due ${when(s.paused_due_at)}` : "" });
  return out;
}

/**
 * An API time as wall-clock time in an IANA zone: `Mon 2030-01-07 09:00:00`.
 *
 * @param {string} iso An ISO 8601 time with a zone.
 * @param {string} zone An IANA zone name.
 * @returns {string | null} null when the zone (or the time) is unknown here.
 */
export function inZone(iso, zone) {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return null;
  let parts;
  try {
    parts = new Intl.DateTimeFormat("en-US", {
      timeZone: zone, weekday: "short", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    }).formatToParts(new Date(ms));
  } catch { return null; }
  const p = Object.fromEntries(parts.map((x) => [x.type, x.value]));
  return `${p.weekday} ${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
}

/**
 * An occurrence in the schedule's zone and in UTC, as the page shows due times.
 *
 * @param {string} iso The occurrence, ISO 8601.
 * @param {string} zone The zone its rule is read in.
 * @returns {string} e.g. `Mon 2030-01-07 09:00:00 Europe/Berlin · 2030-01-07 08:00:00 UTC`;
 *     the UTC time alone for UTC or a zone unknown to this browser.
 */
export function occurrenceText(iso, zone) {
  const local = zone && zone !== "UTC" ? inZone(iso, zone) : null;
  return local ? `${local} ${zone} · ${when(iso)}` : when(iso);
}

/**
 * How a recurring schedule catches up, in words.
 *
 * @param {string} policy `latest`, `all` or `none`.
 * @param {number} windowMs Its catch-up window.
 * @returns {string} e.g. `none: missed occurrences are skipped (missed when over 1m late)`.
 */
export function catchUpText(policy, windowMs) {
  const what = { latest: "only the newest missed occurrence is delivered", all: "every missed occurrence is delivered",
    none: "missed occurrences are skipped" }[policy];
  return `${policy}${what ? `: ${what}` : ""} (missed when over ${durationText(windowMs)} late)`;
}

/**
 * How a recurring schedule ends, in words.
 *
 * @param {{until?: string | null, max_occurrences?: number | null}} recurring
 * @returns {string} e.g. `after occurrence 10 or 2030-12-31 00:00:00 UTC`, `never`.
 */
export function endText(recurring) {
  const ends = [];
  if (recurring.max_occurrences) ends.push(`after occurrence ${recurring.max_occurrences}`);
  if (recurring.until) ends.push(`${ends.length ? "" : "after "}${when(recurring.until)}`);
  return ends.join(" or ") || "never";
}

const DONE = { pause: "paused", resume: "resumed", cancel: "cancelled" };

/**
 * The flash message after a request on a group.
 *
 * @param {"pause" | "resume" | "cancel"} action
 * @param {{group: string, schedules: number}} answer The API's `GroupWritten`.
 * @returns {string} e.g. `paused 3 schedule(s) of group reports`.
 */
export function groupMessage(action, answer) {
  return `${DONE[action]} ${answer.schedules} schedule(s) of group ${answer.group}`;
}

/**
 * Whether the list of a group shows what a request on it wrote (the catalog follows
 * Kafka a little later).
 *
 * @param {"pause" | "resume" | "cancel"} action
 * @param {{id: string}[]} records The answer's records: one per schedule acted on.
 * @param {{id: string, paused: boolean}[]} items The group's pending schedules now.
 * @returns {boolean}
 */
export function groupSettled(action, records, items) {
  const byId = new Map(items.map((s) => [s.id, s]));
  return records.every(({ id }) => {
    const now = byId.get(id);
    if (action === "pause") return now !== undefined && now.paused;
    if (action === "resume") return now === undefined || !now.paused; // a resume may cancel
    return now === undefined;
  });
}
