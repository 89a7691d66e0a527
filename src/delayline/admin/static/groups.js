// The list's group actions: pause, resume or cancel every pending schedule of a group.
import { api, query, caughtUp } from "./api.js";
import { esc } from "./format.js";
import { flash } from "./flash.js";
import { go } from "./nav.js";
import { groupMessage, groupSettled } from "./recurrence.js";

/** The buttons acting on `group`, shown while the list is filtered by it. */
export function groupBar(group) {
  return `
    <div class="actions group-actions" data-testid="group-actions">
      <span>Group <strong class="mono">${esc(group)}</strong>:</span>
      <button type="button" data-group-action="pause">Pause group</button>
      <button type="button" data-group-action="resume">Resume group</button>
      <button type="button" class="danger" data-group-action="cancel">Cancel group</button>
    </div>`;
}

/** Wires groupBar's buttons: write, wait until the list shows it, then refresh. */
export function wireGroupBar(main, group) {
  const buttons = main.querySelectorAll("[data-group-action]");
  buttons.forEach((b) => b.addEventListener("click", async () => {
    const action = b.dataset.groupAction;
    if (action === "cancel" && !confirm(`Cancel every pending schedule of group ${group}?`)) return;
    const from = location.hash;
    buttons.forEach((o) => { o.disabled = true; });
    try {
      const answer = await api(`/groups/${encodeURIComponent(group)}${action === "cancel" ? "" : `/${action}`}`,
        { method: action === "cancel" ? "DELETE" : "POST" });
      flash(groupMessage(action, answer));
      await caughtUp(`/schedules${query({ group, limit: 1000 })}`, (page) => groupSettled(action, answer.records, page.items));
      if (location.hash === from) go(from);
    } catch (err) {
      flash(err.message, true);
    } finally {
      buttons.forEach((o) => { o.disabled = false; });
    }
  }));
}
