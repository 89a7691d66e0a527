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
export function utcInputToIso(value) { return value ? `${value.length === 16 ? value + ":00" : value}Z` : ""; }
export function isoToUtcInput(iso) { return iso ? iso.slice(0, 19) : ""; }
