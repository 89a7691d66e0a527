// Dead letters: newest first, with the reason and the rejected record.
import { api, query } from "./api.js";
import { go } from "./nav.js";
import { esc, when, hexdump, bytesFromBase64 } from "./format.js";

export async function deadLetters(main, params) {
  const reason = params.get("reason") || "";
  const cursor = params.get("cursor") || "";
  const page = await api(`/dead-letters${query({ reason, cursor, limit: 50 })}`);
  const rows = page.items.map((d) => `
    <tr>
      <td>${esc(when(d.at))}</td>
      <td data-testid="dl-reason">${esc(d.reason)}</td>
      <td class="mono">${d.schedule_id ? `<a href="#/schedules/${encodeURIComponent(d.schedule_id)}">${esc(d.schedule_id)}</a>` : "<span class=muted>(no id)</span>"}</td>
      <td class="mono">${esc(d.source)}</td>
      <td><details><summary>payload</summary><pre class="payload">${esc(d.payload_text ?? hexdump(bytesFromBase64(d.payload_base64)))}</pre></details></td>
    </tr>`).join("");
  main.innerHTML = `
    <h1>Dead letters</h1>
    <form class="filters" id="dl-filter">
      <label>Reason contains<input name="reason" value="${esc(reason)}"></label>
      <button type="submit">Filter</button>
    </form>
    <table><thead><tr><th>When</th><th>Reason</th><th>Schedule id</th><th>Source</th><th></th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No dead letters.</td></tr>`}</tbody></table>
    <div class="pager">${page.next_cursor ? `<a href="#/dead-letters${query({ reason, cursor: page.next_cursor })}">Older →</a>` : ""}</div>`;
  main.querySelector("#dl-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    go(`#/dead-letters${query({ reason: new FormData(e.target).get("reason") })}`);
  });
}
