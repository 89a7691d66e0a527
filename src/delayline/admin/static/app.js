// The admin page: a hash router over the views.
import { token, ApiError } from "./api.js";
import { flash } from "./flash.js";
import { dashboard } from "./dashboard.js";
import { list, detail, form } from "./schedules.js";
import { deadLetters } from "./deadletters.js";
import { retries } from "./retries.js";

const main = document.getElementById("main");
let latest = 0;
let focusSearch = false;

// Each view renders into a detached element, swapped in only if no newer navigation
// started meanwhile: a slow answer must not overwrite the page the user moved to.
async function route() {
  const mine = ++latest;
  const view = document.createElement("div");
  const [path, search] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(search || "");
  const parts = (path || "/").split("/").filter(Boolean);
  const section = parts[0] || "dashboard";
  document.querySelectorAll("[data-nav]").forEach((a) => {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
  try {
    if (section === "dashboard") await dashboard(view);
    else if (section === "schedules" && parts.length > 1) await detail(view, decodeURIComponent(parts.slice(1).join("/")));
    else if (section === "schedules") await list(view, params);
    else if (section === "new") await form(view, null);
    else if (section === "edit") await form(view, decodeURIComponent(parts.slice(1).join("/")));
    else if (section === "dead-letters") await deadLetters(view, params);
    else if (section === "retries") await retries(view, parts[1] ? decodeURIComponent(parts[1]) : null);
    else view.innerHTML = "<h1>Not found</h1>";
  } catch (err) {
    const hint = err instanceof ApiError && err.status === 401 ? " Enter the API token at the top right." : "";
    view.innerHTML = `<h1>Could not load</h1><p data-testid="load-error"></p>`;
    view.querySelector("p").textContent = `${err.message}.${hint}`;
  }
  if (mine !== latest) return;
  main.replaceChildren(view);
  if (focusSearch) { focusSearch = false; document.getElementById("search")?.focus(); }
  // The dashboard follows the live figures; other pages stay still while being read.
  if (section === "dashboard") setTimeout(() => { if (mine === latest) route(); }, 5000);
  document.getElementById("status-line").textContent = `Times in UTC · refreshed ${new Date().toISOString().slice(11, 19)}`;
}

document.getElementById("token").value = token.get();
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token.set(document.getElementById("token").value.trim());
  flash("Token saved in this browser.");
  route();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "/" && !["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) {
    const search = document.getElementById("search");
    e.preventDefault();
    if (search) search.focus();
    else { focusSearch = true; location.hash = "#/schedules"; }
  }
});
window.addEventListener("hashchange", route);
route();
