// Navigate to a view; going to the view already shown reloads it (fresh data).
export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}
