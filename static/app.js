// Small behaviours htmx does not cover. Loaded (deferred) on every page; no dependencies.

// A button with data-copy="#selector" copies that field's value (an invite link) to the
// clipboard. navigator.clipboard needs a secure context (https or localhost); elsewhere the
// field is selected and copied the old way, and at worst left selected for Ctrl-C.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const field = document.querySelector(button.dataset.copy);
  if (!field) return;
  let copied = false;
  try {
    await navigator.clipboard.writeText(field.value);
    copied = true;
  } catch {
    field.focus();
    field.select();
    copied = document.execCommand && document.execCommand("copy");
  }
  button.textContent = copied ? "Copied" : "Press Ctrl-C to copy";
  button.dataset.copied = copied ? "yes" : "no";
});

// What the templates would otherwise do with inline code, which the Content-Security-Policy
// forbids (no inline handlers, htmx without eval):

// A poller (hx-trigger="every Ns" data-visible-only) asks nothing while its tab is hidden.
document.addEventListener("htmx:beforeRequest", (event) => {
  const poller = event.target.closest && event.target.closest("[data-visible-only]");
  if (poller && poller === event.target && document.visibilityState !== "visible") {
    event.preventDefault();
  }
});

// A keyword entry box (data-chip-entry) turns what was typed into chips on Enter or a comma;
// Enter must not submit the whole campaign form.
document.addEventListener("keydown", (event) => {
  if (!event.target.matches || !event.target.matches("[data-chip-entry]")) return;
  if (event.key === "Enter") event.preventDefault();
});
document.addEventListener("keyup", (event) => {
  if (!event.target.matches || !event.target.matches("[data-chip-entry]")) return;
  if (event.key === "Enter" || event.key === ",") {
    event.target.dispatchEvent(new CustomEvent("chip-entered", { bubbles: true }));
  }
});

// A thumbnail that does not load (an expired CDN link) is removed rather than shown broken.
document.addEventListener(
  "error",
  (event) => {
    if (event.target.matches && event.target.matches("img[data-remove-on-error]")) {
      event.target.remove();
    }
  },
  true,
);

// A field the server marked wrong stops looking wrong as soon as the person changes it (the
// server checks it again on save): its red border and message go.
function clearFieldError(event) {
  const field = event.target.closest && event.target.closest(".has-error");
  if (!field) return;
  field.classList.remove("has-error");
  field.querySelectorAll(".field-error").forEach((message) => message.remove());
}
document.addEventListener("input", clearFieldError);
document.addEventListener("change", clearFieldError);

// The sign-up form's hidden time_zone field gets the browser's zone, the new workspace's
// default (without JavaScript it stays empty and the workspace is in UTC).
for (const field of document.querySelectorAll("input[data-browser-zone]")) {
  try {
    field.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch {
    field.value = "";
  }
}

// A form that comes back refused (htmx swaps it in with its fields marked) puts the caret in
// the first field to fix, scrolled into view: the save button sits at the foot of a long form,
// and the marks and the "Nothing was saved" line above it were out of sight. A field with no
// control to type in yet (the post picker still loading) gets its message focused instead.
document.addEventListener("htmx:afterSettle", (event) => {
  const form = event.target;
  if (!form.matches || !form.matches("form") || !form.isConnected) return;
  const visible = (element) => element.getClientRects().length > 0;
  const field = Array.from(form.querySelectorAll(".has-error")).find(visible);
  if (!field) return;
  const control = Array.from(
    field.querySelectorAll("input:not([type=hidden]), select, textarea"),
  ).find((element) => visible(element) && !element.disabled);
  if (control) {
    control.focus();
    return;
  }
  const message = field.querySelector(".field-error") || field;
  message.setAttribute("tabindex", "-1");
  message.focus();
});
