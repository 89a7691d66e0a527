// One status message at a time, announced to screen readers.
export function flash(message, isError = false) {
  const box = document.getElementById("flash");
  box.innerHTML = "";
  const div = document.createElement("div");
  div.className = isError ? "msg err" : "msg";
  div.dataset.testid = "flash";
  div.textContent = message;
  box.appendChild(div);
}
