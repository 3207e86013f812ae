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
