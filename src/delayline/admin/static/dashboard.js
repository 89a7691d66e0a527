// Dashboard: pending, deliveries per minute, lateness histogram, dead letters, status.
import { api } from "./api.js";
import { esc, bucketLabel } from "./format.js";
import { pacingRows } from "./pacing.js";

// Bar heights go in data-height and are set through the CSSOM by sizeBars: the page's
// Content-Security-Policy (style-src 'self') refuses inline style attributes.
function bars(values, labels, title) {
  const max = Math.max(1, ...values);
  const cols = values.map((v, i) =>
    `<div class="b" data-height="${(100 * v) / max}" title="${esc(labels[i])}: ${v}"></div>`).join("");
  const marks = labels.map((l) => `<span>${esc(l)}</span>`).join("");
  return `<div class="chart" role="img" aria-label="${esc(title)}">${cols}</div><div class="chart-labels">${marks}</div>`;
}

export async function dashboard(main) {
  const [stats, info] = await Promise.all([api("/stats?minutes=30"), api("/info")]);
  const perMinute = stats.fired_per_minute.map((m) => m.deliveries);
  const minuteLabels = stats.fired_per_minute.map((m, i) => (i % 5 === 4 ? m.minute.slice(11, 16) : ""));
  const lastMinute = perMinute.length > 1 ? perMinute[perMinute.length - 2] : 0;
  const lateLabels = stats.lateness_counts.map((_, i) => bucketLabel(stats.lateness_buckets_ms, i));
  const pipeline = info.pipeline;
  main.innerHTML = `
    <h1>Dashboard</h1>
    <div class="cards">
      <div class="card"><div class="n" data-testid="pending-count">${stats.pending}</div><div class="l">pending schedules</div></div>
      <div class="card"><div class="n" data-testid="per-minute">${lastMinute}</div><div class="l">deliveries in the last full minute</div></div>
      <div class="card"><div class="n">${perMinute.reduce((a, b) => a + b, 0)}</div><div class="l">deliveries in 30 min</div></div>
      <div class="card"><div class="n" data-testid="dead-count"><a href="#/dead-letters">${stats.dead_letters}</a></div><div class="l">dead letters</div></div>
    </div>
    <h2>Deliveries per minute (UTC, last 30 min)</h2>
    ${bars(perMinute, minuteLabels, "deliveries per minute")}
    <h2>Lateness of deliveries (last 30 min)</h2>
    ${bars(stats.lateness_counts, lateLabels, "lateness histogram")}
    <h2>Status</h2>
    <dl class="kv">
      <dt>Pipeline</dt><dd data-testid="pipeline-status">${esc(pipeline.status)}${pipeline.url ? ` <span class="muted">(${esc(pipeline.url)})</span>` : ""}</dd>
      <dt>Catalog</dt><dd>${info.catalog.caught_up ? "current" : "catching up"}, lag ${esc(Object.values(info.catalog.lag).reduce((a, b) => a + b, 0))} records</dd>
      <dt>Kafka</dt><dd class="mono">${esc(info.bootstrap_servers)} (${info.brokers.length} broker${info.brokers.length === 1 ? "" : "s"})</dd>
      <dt>Schedules topics</dt><dd class="mono">${esc(info.topics.schedules.join(", "))}</dd>
      <dt>Writes</dt><dd>${info.writes_enabled ? "enabled (token required)" : "disabled: the API runs without --token"}</dd>
      <dt>Version</dt><dd>${esc(info.version)}</dd>
    </dl>
    ${pacingTable(pipeline.progress)}`;
  sizeBars(main);
}

// Per target topic the pipeline's committer paces (--target-rate, delivery windows).
function pacingTable(progress) {
  const rows = pacingRows(progress);
  if (!rows.length) return "";
  const body = rows.map((r) => `
    <tr data-testid="pacing-row" data-topic="${esc(r.topic)}"><td class="mono">${esc(r.topic)}</td><td>${esc(r.rate)}</td>
    <td class="num">${esc(r.held)}</td><td class="num">${esc(r.average)}</td><td class="num">${esc(r.longest)}</td><td class="num">${esc(r.queued)}</td></tr>`).join("");
  return `
    <h2>Delivery pacing</h2>
    <p class="muted">Per target topic the committer paces, since it started: deliveries its rate held back, the delay that added, and those waiting for a slot now ("window only": delivery windows alone pace it).</p>
    <table data-testid="pacing"><thead><tr><th>Target topic</th><th>Rate</th><th>Held back</th><th>Average added delay</th><th>Longest delay</th><th>Queued now</th></tr></thead>
    <tbody>${body}</tbody></table>`;
}

function sizeBars(root) {
  for (const bar of root.querySelectorAll(".chart .b[data-height]")) {
    bar.style.height = `${bar.dataset.height}%`;
  }
}
