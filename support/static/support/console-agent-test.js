// A draft test's page (/console/agent/test/<id>/): while the test runs (aria-busy on its progress), the page
// reads itself again every few seconds, so the progress and, at the end, the results appear without a click.
const POLL_MS = 4000;
const busy = document.querySelector("[data-testid='agent-test-progress'][aria-busy='true']");
if (busy) {
  setTimeout(() => window.location.reload(), POLL_MS);
}
