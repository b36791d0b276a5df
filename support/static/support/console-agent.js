// The profile editor's widget preview: the colour, names, greeting and launcher label as typed, before saving.
// Text is set as text; the colour only when it is a hex value (as the widget itself would take it).
const form = document.querySelector('[data-testid="agent-form"]');
const field = (name) => form?.querySelector(`[name="${name}"]`);
const part = (name) => document.querySelector(`[data-preview="${name}"]`);
const HEX = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i;

function redraw() {
  const agent = field("agent_name").value.trim();
  const colour = field("colour").value.trim();
  if (HEX.test(colour)) {
    part("bar").style.setProperty("--preview-colour", colour);
    part("launcher").style.setProperty("--preview-colour", colour);
  }
  part("agent").textContent = agent;
  part("greeting").textContent =
    field("greeting").value.trim() || `Hi, I'm ${agent} from ${field("shop_name").value.trim()}.`;
  part("launcher").textContent = field("launcher_label").value.trim() || "Chat with us";
}

if (form && part("bar")) {
  form.addEventListener("input", redraw);
  redraw();
}
