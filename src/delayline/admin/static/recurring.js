// Recurring schedules and pauses: the form's repeat fields, the detail's recurrence, pause/resume.
import { api, caughtUp } from "./api.js";
import { esc, when, relative } from "./format.js";
import { flash } from "./flash.js";
import { go } from "./nav.js";
import { recurrenceBody, recurrenceFields, rowMarkers, occurrenceText, catchUpText, endText } from "./recurrence.js";

const REPEAT = ["cron", "every", "time_zone", "catch_up", "catch_up_window", "until", "max_occurrences"];
const groupLink = (group) => `<a href="#/schedules?group=${encodeURIComponent(group)}" data-testid="group">${esc(group)}</a>`;

/** The markers of a list row (recurring, paused), as tags. */
export function markers(s) {
  return rowMarkers(s).map((m) => `<span class="tag ${m.kind}" data-testid="marker-${m.kind}" title="${esc(m.title)}">${esc(m.label)}</span>`).join(" ");
}

/** A list row's group cell: its name, a link filtering by it. */
export const groupCell = (s) => (s.group ? groupLink(s.group) : "");

/** The form's group field and repeat fields, filled from the schedule edited (if any). */
export function repeatFields(existing) {
  const v = recurrenceFields(existing?.recurring);
  const opt = (value) => `<option value="${value}" ${v.catch_up === value ? "selected" : ""}>${value}</option>`;
  const notes = [];
  if (existing?.recurring) notes.push("Saving starts the series again at occurrence 1, from the due time above.");
  if (existing?.paused) notes.push("It is paused: saving writes it unpaused, due as set above.");
  return `
      <label>Group<input name="group" value="${esc(existing?.group ?? "")}" placeholder="optional, e.g. reports"></label>
      <fieldset class="wide repeat">
        <legend>Repeat (optional)</legend>
        <p class="muted hint">With a cron expression or a rate the schedule recurs, and the due time above is its start (none given: now). ${notes.join(" ")}</p>
        <label>Cron expression<input name="cron" class="mono" value="${esc(v.cron)}" placeholder="0 9 * * 1-5"></label>
        <label>…or every<input name="every" value="${esc(v.every)}" placeholder="15m"></label>
        <label>Time zone<input name="time_zone" value="${esc(v.time_zone)}" placeholder="Europe/Berlin"></label>
        <label>Catch-up<select name="catch_up">${opt("latest")}${opt("all")}${opt("none")}</select></label>
        <label>Catch-up window<input name="catch_up_window" value="${esc(v.catch_up_window)}" placeholder="1m"></label>
        <label>Until (UTC)<input type="datetime-local" step="0.001" name="until" value="${esc(v.until)}"></label>
        <label>Max occurrences<input type="number" min="1" step="1" name="max_occurrences" value="${esc(v.max_occurrences)}"></label>
      </fieldset>`;
}

/** What the repeat fields add to an API body: `group` and `recurrence`, when given. */
export function readRepeat(formData) {
  const out = {};
  const group = String(formData.get("group") ?? "").trim();
  if (group) out.group = group;
  const recurrence = recurrenceBody(Object.fromEntries(REPEAT.map((k) => [k, formData.get(k)])));
  if (recurrence) out.recurrence = recurrence;
  return out;
}

/** The detail's due time: paused (with the due time it had) or due. */
export function dueText(c) {
  return c.paused
    ? `paused (was due ${esc(when(c.paused_due_at))} <span class="muted">${esc(relative(c.paused_due_at))}</span>)`
    : `${esc(when(c.due_at))} <span class="muted">${esc(relative(c.due_at))}</span>`;
}

/** The detail's group row, if it has one. */
export const groupRow = (c) => (c.group ? `<dt>Group</dt><dd>${groupLink(c.group)}</dd>` : "");

/** The detail's recurrence section: rule, occurrence, end, catch-up, next occurrences. */
export function recurrenceSection(c) {
  const r = c.recurring;
  if (!r) return c.recurrence ? `<h2>Recurrence</h2><p data-testid="rule">${esc(c.recurrence)}: it goes to the dead letters when due.</p>` : "";
  const next = r.next.map((iso) => `<li>${esc(occurrenceText(iso, r.time_zone))}</li>`).join("");
  return `
    <h2>Recurrence</h2>
    <dl class="kv" data-testid="recurrence">
      <dt>Rule</dt><dd class="mono" data-testid="rule">${esc(r.rule)}</dd>
      <dt>Occurrence</dt><dd data-testid="occurrence">${c.paused ? "paused at" : "due for"} occurrence ${r.occurrence}</dd>
      <dt>Ends</dt><dd>${esc(endText(r))}</dd>
      <dt>Catch-up</dt><dd data-testid="catch-up">${esc(catchUpText(r.catch_up, r.catch_up_window_ms))}</dd>
      <dt>Next occurrences</dt><dd>${next ? `<ol class="next" data-testid="next-occurrences">${next}</ol>` : `<span class="muted">none: the series ends</span>`}</dd>
    </dl>`;
}

/** Pause or Resume, whichever applies (header-contract schedules only). */
export function pauseButton(c) {
  if (c.contract !== "header") return "";
  return c.paused
    ? `<button type="button" class="primary" id="resume">Resume</button>`
    : `<button type="button" id="pause">Pause</button>`;
}

/** Wires the Pause / Resume button of schedule `id`'s detail. */
export function wirePause(main, id) {
  const button = main.querySelector("#pause, #resume");
  if (!button) return;
  const action = button.id;
  button.addEventListener("click", async () => {
    const path = `/schedules/${encodeURIComponent(id)}`;
    button.disabled = true;
    try {
      const written = await api(`${path}/${action}`, { method: "POST" });
      flash(`${action === "pause" ? "Pause" : "Resume"} of ${id} written${written.warning ? `: ${written.warning}` : ""}.`);
      const from = location.hash;
      await caughtUp(path, (now) => (action === "pause" ? Boolean(now.current?.paused) : !now.current?.paused));
      if (location.hash === from) go(from);
    } catch (err) {
      button.disabled = false;
      flash(err.message, true);
    }
  });
}
