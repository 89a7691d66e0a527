// Talks to the delayline REST API of the server that serves this page.
const TOKEN_KEY = "delayline.token";

export const token = {
  get: () => localStorage.getItem(TOKEN_KEY) || "",
  set: (value) => value ? localStorage.setItem(TOKEN_KEY, value) : localStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (token.get()) headers.Authorization = `Bearer ${token.get()}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text }; }
  if (!response.ok) {
    const detail = data && typeof data.detail === "string" ? data.detail : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, detail);
  }
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

// Writes reach the catalog through Kafka: wait (briefly) until what `path` answers
// shows what was written, so the next page reads the user's own write.
export async function caughtUp(path, seen, timeoutMs = 10000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try { if (seen(await api(path))) return true; } catch { /* not there yet */ }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}
