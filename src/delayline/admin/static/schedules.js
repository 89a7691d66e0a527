// Schedules: the pending list, one schedule with its versions, create/edit/cancel.
import { api, query, caughtUp } from "./api.js";
import { esc, when, hexdump, bytesFromBase64, prettyJson, utcInputToIso, isoToUtcInput, parseHeaders } from "./format.js";
import { flash } from "./flash.js";
import { go } from "./nav.js";
import { isOwnHeader, durationText } from "./recurrence.js";
import { windowBody, windowText } from "./pacing.js";
import { markers, groupCell, repeatFields, readRepeat, dueText, groupRow, recurrenceSection, pauseButton, wirePause } from "./recurring.js";
import { groupBar, wireGroupBar } from "./groups.js";

const FILTERS = ["id", "id_match", "contract", "target_topic", "group", "due_from", "due_to", "sort", "order", "limit"];
const CONTRACTS = { header: "header", envelope: "JSON envelope", "timer-request": "timer request" };
const keyText = (s) => s.target_key ?? (s.target_key_base64 ? `(binary) ${s.target_key_base64}` : "");
const link = (id) => `#/schedules/${encodeURIComponent(id)}`;

const one = (id) => `/schedules/${encodeURIComponent(id)}`;

export async function list(main, params) {
  const f = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) || ""]));
  f.id_match ||= "prefix"; f.sort ||= "due"; f.order ||= "asc"; f.limit ||= "50";
  const cursor = params.get("cursor") || "";
  const page = await api(`/schedules${query({ ...f, due_from: utcInputToIso(f.due_from), due_to: utcInputToIso(f.due_to), cursor })}`);
  const opt = (name, value, label) => `<option value="${value}" ${f[name] === value ? "selected" : ""}>${label}</option>`;
  const rows = page.items.map((s) => `
    <tr data-testid="schedule-row" data-id="${esc(s.id)}">
      <td class="mono"><a href="${link(s.id)}">${esc(s.id)}</a> ${markers(s)}</td>
      <td>${dueText(s)}</td>
      <td data-testid="contract">${esc(CONTRACTS[s.contract] ?? s.contract)}</td>
      <td class="mono">${esc(s.target_topic)}</td>
      <td class="mono">${esc(keyText(s))}</td>
      <td class="mono">${groupCell(s)}</td>
      <td>${esc(when(s.created_at))}</td>
    </tr>`).join("");
  main.innerHTML = `
    <h1>Pending schedules</h1>
    <form class="filters" id="filters" role="search">
      <label>Id <input name="id" id="search" value="${esc(f.id)}" placeholder="press / to search"></label>
      <label>Match<select name="id_match">${opt("id_match", "prefix", "starts with")}${opt("id_match", "contains", "contains")}</select></label>
      <label>Contract<select name="contract">${opt("contract", "", "any")}${Object.entries(CONTRACTS).map(([k, v]) => opt("contract", k, v)).join("")}</select></label>
      <label>Target topic<input name="target_topic" value="${esc(f.target_topic)}"></label>
      <label>Group<input name="group" value="${esc(f.group)}"></label>
      <label>Due from (UTC)<input type="datetime-local" name="due_from" value="${esc(f.due_from)}"></label>
      <label>Due before (UTC)<input type="datetime-local" name="due_to" value="${esc(f.due_to)}"></label>
      <label>Sort<select name="sort">${opt("sort", "due", "due time")}${opt("sort", "id", "id")}${opt("sort", "created", "created")}</select></label>
      <label>Order<select name="order">${opt("order", "asc", "ascending")}${opt("order", "desc", "descending")}</select></label>
      <label>Per page<select name="limit">${["25", "50", "100", "500", "1000"].map((n) => opt("limit", n, n)).join("")}</select></label>
      <button type="submit" class="primary">Apply</button>
    </form>
    ${f.group ? groupBar(f.group) : ""}
    <table><thead><tr><th>Id</th><th>Due</th><th>Contract</th><th>Target topic</th><th>Target key</th><th>Group</th><th>Created</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted" data-testid="no-schedules">No pending schedules match.</td></tr>`}</tbody></table>
    <div class="pager">
      ${cursor ? `<a href="#/schedules${query(f)}">⟲ First page</a>` : ""}
      ${page.next_cursor ? `<a href="#/schedules${query({ ...f, cursor: page.next_cursor })}" data-testid="next-page">Next page →</a>` : ""}
      <span class="muted">${page.items.length} shown</span>
    </div>`;
  main.querySelector("#filters").addEventListener("submit", (e) => {
    e.preventDefault();
    go(`#/schedules${query(Object.fromEntries(new FormData(e.target)))}`);
  });
  if (f.group) wireGroupBar(main, f.group);
}

function payloadView(current) {
  const bytes = bytesFromBase64(current.payload_base64);
  const views = { text: current.payload_text ?? "(not UTF-8 text)", hex: hexdump(bytes) };
  if (current.payload_json) views.json = prettyJson(current.payload_text);
  const first = views.json ? "json" : current.payload_text !== null ? "text" : "hex";
  const buttons = Object.keys(views).map((k) => `<button type="button" data-view="${k}" aria-pressed="${k === first}">${k.toUpperCase()}</button>`).join("");
  return { html: `<div class="seg" role="group" aria-label="Payload view">${buttons}</div><pre class="payload" data-testid="payload">${esc(views[first])}</pre>`, views };
}

export async function detail(main, id) {
  const d = await api(`/schedules/${encodeURIComponent(id)}`);
  const c = d.current;
  const versions = d.versions.map((v) => `
    <tr><td><span class="tag ${esc(v.kind)}">${esc(v.kind)}</span></td><td>${esc(when(v.at))}</td>
    <td>${esc(when(v.due_at))}</td><td class="mono">${esc(v.topic)}/${v.partition}/${v.offset}</td>
    <td>${v.lateness_ms !== null ? `${v.lateness_ms} ms late` : ""}${esc(v.reason ?? "")}</td></tr>`).join("");
  const payload = c ? payloadView(c) : null;
  main.innerHTML = `
    <h1>Schedule <span class="mono">${esc(d.id)}</span> <span class="tag" data-testid="state">${d.pending ? "pending" : "not pending"}</span> ${c ? markers(c) : ""}</h1>
    ${c ? `
      <div class="actions">
        ${c.contract === "header" ? `<a class="button" href="#/edit/${encodeURIComponent(d.id)}">Edit</a>` : ""}
        ${pauseButton(c)}
        <button type="button" class="danger" id="cancel">Cancel schedule</button>
      </div>
      <dl class="kv">
        <dt>Due</dt><dd data-testid="due">${dueText(c)}</dd>
        ${c.window_ms ? `<dt>Delivery window</dt><dd data-testid="window">${esc(windowText(c.window_ms))}</dd>` : ""}
        ${groupRow(c)}
        <dt>Target topic</dt><dd class="mono">${esc(c.target_topic)}</dd>
        <dt>Target key</dt><dd class="mono">${esc(keyText(c) || "(null)")}</dd>
        <dt>Stored at</dt><dd class="mono">${esc(c.topic)}/${c.partition}/${c.offset}</dd>
        <dt>Contract</dt><dd data-testid="detail-contract">${esc(CONTRACTS[c.contract] ?? c.contract)}${c.contract === "header" ? "" : ` <span class="muted">(edit it through its own contract; cancel works here)</span>`}</dd>
        <dt>Created / updated</dt><dd>${esc(when(c.created_at))} / ${esc(when(c.updated_at))}</dd>
        <dt>Headers</dt><dd class="mono">${c.headers.map((h) => `${esc(h.name)}=${esc(h.value ?? "null")}`).join("<br>")}</dd>
      </dl>
      ${recurrenceSection(c)}
      <h2>Payload (${c.payload_size} bytes)</h2>${payload.html}` : `<p class="muted">Nothing pending for this id.</p>`}
    <h2>Versions</h2>
    <table data-testid="versions"><thead><tr><th>Event</th><th>When</th><th>Due</th><th>Record</th><th></th></tr></thead><tbody>${versions}</tbody></table>`;
  if (payload) {
    main.querySelectorAll("[data-view]").forEach((b) => b.addEventListener("click", () => {
      main.querySelectorAll("[data-view]").forEach((o) => o.setAttribute("aria-pressed", String(o === b)));
      main.querySelector("[data-testid=payload]").textContent = payload.views[b.dataset.view];
    }));
    main.querySelector("#cancel").addEventListener("click", async () => {
      if (!confirm(`Cancel schedule ${d.id}?`)) return;
      try {
        await api(`/schedules/${encodeURIComponent(d.id)}`, { method: "DELETE" });
        flash(`Cancel of ${d.id} written.`);
        const from = location.hash;
        await caughtUp(one(d.id), (now) => !now.pending);
        if (location.hash === from) go("#/schedules");
      } catch (err) { flash(err.message, true); }
    });
    wirePause(main, d.id);
  }
}

export async function form(main, id) {
  const existing = id ? (await api(`/schedules/${encodeURIComponent(id)}`)).current : null;
  const v = existing || { target_topic: "", target_key: "", payload_text: "", headers: [] };
  // Bytes that are not text are kept exactly as they are: shown, never edited.
  const binaryPayload = existing !== null && existing.payload_text === null;
  const binaryKey = existing !== null && existing.target_key === null && existing.target_key_base64 !== null;
  const custom = (v.headers || []).filter((h) => !isOwnHeader(h.name));
  const textHeaders = custom.filter((h) => h.encoding !== "base64").map((h) => `${h.name}=${h.value ?? ""}`).join("\n");
  const binaryHeaders = custom.filter((h) => h.encoding === "base64");
  main.innerHTML = `
    <h1>${id ? `Edit <span class="mono">${esc(id)}</span>` : "New schedule"}</h1>
    <form class="edit" id="edit">
      <label>Id<input name="id" value="${esc(id || "")}" ${id ? "readonly" : ""} placeholder="empty: a UUID is made up"></label>
      <label>Target topic<input name="target_topic" required value="${esc(v.target_topic)}"></label>
      <label>Target key<input name="target_key" value="${esc(binaryKey ? "(binary, kept as is)" : v.target_key ?? "")}" ${binaryKey ? "disabled" : ""}></label>
      <label>Due at (UTC)<input type="datetime-local" step="0.001" name="due_at" value="${esc(isoToUtcInput(existing?.paused_due_at ?? existing?.due_at))}"></label>
      <label>…or due in (seconds)<input type="number" min="0" name="delay_s" placeholder="e.g. 60"></label>
      <label>Delivery window<input name="window" value="${esc(durationText(existing?.window_ms))}" placeholder="optional, e.g. 15m" title="Delivered anywhere from the due time to the due time plus the window, spread evenly; never early. At most 1h."></label>
      ${repeatFields(existing)}
      <label class="wide">Payload (UTF-8 text)<textarea name="payload" ${binaryPayload ? "disabled" : ""}>${esc(binaryPayload ? `(${existing.payload_size} bytes of binary data, kept as is)` : v.payload_text ?? "")}</textarea></label>
      <label class="wide">Extra headers, one name=value per line${binaryHeaders.length ? ` (${binaryHeaders.length} binary header(s) kept as is)` : ""}<textarea name="headers" rows="3">${esc(textHeaders)}</textarea></label>
      <div class="wide actions"><button type="submit" class="primary">${id ? "Save" : "Create"}</button><a href="#/schedules">Back</a></div>
    </form>`;
  main.querySelector("#edit").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const body = { target_topic: f.get("target_topic") };
    if (binaryPayload) Object.assign(body, { payload: existing.payload_base64, payload_encoding: "base64" });
    else body.payload = f.get("payload");
    if (binaryKey) Object.assign(body, { target_key: existing.target_key_base64, target_key_encoding: "base64" });
    else if (f.get("target_key")) body.target_key = f.get("target_key");
    if (f.get("delay_s")) body.delay_ms = Math.round(Number(f.get("delay_s")) * 1000);
    else if (f.get("due_at")) body.due_at = utcInputToIso(f.get("due_at"));
    Object.assign(body, readRepeat(f));
    try { Object.assign(body, windowBody(f.get("window"))); } catch (err) { flash(err.message, true); return; }
    body.headers = parseHeaders(f.get("headers")).concat(binaryHeaders.map((h) => ({ name: h.name, value: h.value, encoding: "base64" })));
    const newId = id || f.get("id") || undefined;
    const from = location.hash;
    try {
      const written = id
        ? await api(`/schedules/${encodeURIComponent(id)}`, { method: "PUT", body })
        : await api("/schedules", { method: "POST", body: { ...body, id: newId } });
      flash(`Written to ${written.topic}/${written.partition}/${written.offset}.`);
      await caughtUp(one(written.id), (now) =>
        (now.current && now.current.offset === written.offset) ||
        now.versions.some((x) => x.topic === written.topic && x.offset === written.offset));
      if (location.hash === from) go(link(written.id));
    } catch (err) { flash(err.message, true); }
  });
}
