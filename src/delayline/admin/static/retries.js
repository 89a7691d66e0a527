// Retrying consumer groups (docs/retry.md): their retries and dead letters by source
// topic; a group's dead letters, newest first, to redrive the chosen ones once.
import { api, query } from "./api.js";
import { esc, when, hexdump, bytesFromBase64 } from "./format.js";
import { flash } from "./flash.js";
import { go } from "./nav.js";

export async function retries(main, group) {
  if (group) return deadLettersOf(main, group);
  const { groups } = await api("/retries");
  const rows = groups.flatMap((g) => (g.sources.length ? g.sources : [null]).map((s) => `
    <tr>
      <td><a href="#/retries/${encodeURIComponent(g.group)}">${esc(g.group)}</a></td>
      <td class="mono">${s ? esc(s.source_topic) : "<span class=muted>none yet</span>"}</td>
      <td data-testid="retry-count">${s ? s.retries : 0}</td>
      <td data-testid="dead-count">${s ? Object.values(s.dead_letters).reduce((a, b) => a + b, 0) : 0}</td>
      <td>${s ? esc(Object.entries(s.dead_letters).map(([r, n]) => `${r} ${n}`).join(", ")) : ""}</td>
    </tr>`)).join("");
  main.innerHTML = `
    <h1>Retries</h1>
    <p class="muted">Consumer groups that retry later through delayline (the API's --retry-groups).</p>
    <table><thead><tr><th>Group</th><th>Source topic</th><th>Retries</th><th>Dead letters</th><th>By reason</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="5" class="muted">No groups watched: start the API with --retry-groups.</td></tr>`}</tbody></table>`;
}

async function deadLettersOf(main, group) {
  const topic = `${group}-dlt`;
  const page = await api(`/retries/dead-letters${query({ topic, limit: 200 })}`);
  const rows = page.items.map((d) => `
    <tr>
      <td><input type="checkbox" name="id" value="${esc(d.id)}" aria-label="choose ${esc(d.id)}" ${d.redriven ? "disabled" : ""}></td>
      <td>${esc(when(d.at))}</td>
      <td class="mono">${esc(d.source ?? "")}</td>
      <td>${d.retries ?? ""}</td>
      <td data-testid="rdl-reason">${esc(d.reason ?? "")}</td>
      <td class="mono">${esc(d.error_class ?? "")}: ${esc(d.error_message ?? "")}</td>
      <td data-testid="rdl-redriven">${d.redriven ? "redriven" : ""}</td>
      <td><details><summary>payload</summary><pre class="payload">${esc(d.payload_text ?? hexdump(bytesFromBase64(d.payload_base64)))}</pre></details></td>
    </tr>`).join("");
  main.innerHTML = `
    <h1>Dead letters of <span class="mono">${esc(group)}</span></h1>
    <p><a href="#/retries">All groups</a> · topic <span class="mono">${esc(topic)}</span></p>
    <form id="redrive">
      <table><thead><tr><th></th><th>When</th><th>First read from</th><th>Retries</th><th>Reason</th><th>Error</th><th></th><th></th></tr></thead>
      <tbody>${rows || `<tr><td colspan="8" class="muted">No dead letters.</td></tr>`}</tbody></table>
      <div class="actions"><button type="submit">Redrive chosen</button></div>
    </form>`;
  main.querySelector("#redrive").addEventListener("submit", async (e) => {
    e.preventDefault();
    const ids = new FormData(e.target).getAll("id");
    if (!ids.length) { flash("Choose the dead letters to redrive.", true); return; }
    try {
      const done = await api("/retries/dead-letters/redrive", { method: "POST", body: { topic, ids } });
      const already = done.already.length ? `; ${done.already.length} redriven before` : "";
      flash(`Redriven: ${done.redriven.length}${already}.`);
      go(location.hash);
    } catch (err) {
      flash(err.message, true);
    }
  });
}
