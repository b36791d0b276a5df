// The Reports page's charts: each figure's counts over days or weeks, drawn by uPlot (vendor/uPlot.iife.min.js,
// the global `uPlot`). The numbers come from the server-rendered data-points attribute ("2026-11-23=4,..."),
// also shown as a table under each chart; nothing here writes HTML.

const ACCENT = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#2253c0";

const DAY = 86400;
const DATE = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", timeZone: "UTC" });

function parsePoints(text) {
  const xs = [];
  const ys = [];
  for (const pair of (text || "").split(",").filter(Boolean)) {
    const [day, n] = pair.split("=");
    xs.push(Date.parse(`${day}T00:00:00Z`) / 1000);
    ys.push(Number(n));
  }
  return [xs, ys];
}

function draw(el) {
  const data = parsePoints(el.dataset.points);
  const width = () => Math.max(240, el.clientWidth);
  const plot = new window.uPlot({
    width: width(),
    height: 180,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    // Each point is a day (or a week's Monday) at midnight UTC: shown as that date wherever the browser is.
    tzDate: (ts) => window.uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    axes: [{ stroke: "#5a6475", grid: { stroke: "#e9ecf1" }, space: 56, incrs: [DAY, 7 * DAY, 28 * DAY],
      values: (u, splits) => splits.map((ts) => DATE.format(new Date(ts * 1000))) },
      { stroke: "#5a6475", grid: { stroke: "#e9ecf1" }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }],
    series: [{}, { label: "Count", stroke: ACCENT, width: 2, fill: "rgba(34, 83, 192, 0.08)", points: { show: data[0].length <= 31 } }],
  }, data, el);
  new ResizeObserver(() => plot.setSize({ width: width(), height: 180 })).observe(el);
}

if (typeof window.uPlot === "function") {
  for (const el of document.querySelectorAll(".report-plot")) draw(el);
}
