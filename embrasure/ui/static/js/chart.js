// A small time-series chart, drawn as SVG by hand (docs/ui.md#what-each-run-did): one
// value per run over time — rows written, bytes written — with a y axis from zero, time
// ticks, a line through the points and each point a link to its run. A charting library
// would be ten times this file for one kind of chart.
//
// The points are in the DOM as links with accessible names ("2026-01-15 01:10:00 UTC:
// 2,000 rows, COMPLETE"), so a screen reader — or a test — reads the chart as a list of
// runs; a point at zero (a run that wrote nothing) is ringed in the warning colour.

import { time } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 760;
const H = 210;
const M = { left: 72, right: 18, top: 14, bottom: 30 };

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// The step between y ticks: 1, 2, 2.5 or 5 times a power of ten, at least `raw`; with
// `binary`, of the largest power of 1024 below the values (bytes: 1 MiB steps, not
// 976.6 KiB ones).
function niceStep(raw, maxY, binary) {
  if (!(raw > 0)) return 1;
  const unit = binary && maxY >= 1024 ? 1024 ** Math.floor(Math.log(maxY) / Math.log(1024)) : 1;
  const scaled = raw / unit;
  const power = 10 ** Math.floor(Math.log10(scaled));
  const step = [1, 2, 2.5, 5, 10].find((m) => m * power >= scaled) * power * unit;
  return step >= 1 ? step : 1; // counts and bytes are whole numbers
}

const DAY = 86_400_000;

function timeTick(ms, span) {
  const iso = new Date(ms).toISOString(); // UTC, as every time on these pages
  return span > 2 * DAY ? iso.slice(0, 10) : `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
}

// points: [{t (ms since the epoch), y, label (the point's accessible name), href, state}]
// in any order; `format` turns a y value into a tick label; `binary` ticks in powers of
// 1024 (bytes).
export function timeChart({ title, points, format, binary = false }) {
  const sorted = [...points].sort((a, b) => a.t - b.t);
  const maxY = Math.max(0, ...sorted.map((p) => p.y));
  const step = niceStep(maxY / 4, maxY, binary);
  const top = Math.max(step, Math.ceil(maxY / step) * step);
  let t0 = sorted[0].t;
  let t1 = sorted.at(-1).t;
  if (t0 === t1) {
    t0 -= 3_600_000; // one point: an hour either side, so it sits in the middle
    t1 += 3_600_000;
  }
  const x = (t) => M.left + ((t - t0) / (t1 - t0)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - (v / top) * (H - M.top - M.bottom);

  const grid = [];
  for (let v = 0; v <= top + step / 2; v += step) {
    grid.push(
      s("line", { class: "grid", x1: M.left, x2: W - M.right, y1: y(v), y2: y(v) }),
      s("text", { class: "tick", x: M.left - 8, y: y(v) + 4, "text-anchor": "end" }, format(v)),
    );
  }
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const t = t0 + f * (t1 - t0);
    const anchor = f === 0 ? "start" : f === 1 ? "end" : "middle";
    return s(
      "text",
      { class: "tick", x: x(t), y: H - 8, "text-anchor": anchor },
      timeTick(t, t1 - t0),
    );
  });
  const line = s("polyline", {
    class: "series",
    points: sorted.map((p) => `${x(p.t).toFixed(1)},${y(p.y).toFixed(1)}`).join(" "),
  });
  const dots = sorted.map((p) =>
    s(
      "a",
      { href: p.href, "aria-label": p.label, class: "point" },
      s(
        "circle",
        {
          class: `pt state-${(p.state || "other").toLowerCase()}${p.y === 0 ? " zero" : ""}`,
          cx: x(p.t).toFixed(1),
          cy: y(p.y).toFixed(1),
          r: p.y === 0 ? 6 : 4.5,
        },
        s("title", {}, p.label),
      ),
    ),
  );
  const svg = s(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "group", "aria-label": title },
    s("g", { "aria-hidden": "true" }, ...grid, ...ticks, line),
    ...dots,
  );
  const figure = document.createElement("figure");
  figure.className = "chart-figure";
  const caption = document.createElement("figcaption");
  caption.textContent = `${title} (${sorted.length} run${sorted.length === 1 ? "" : "s"}, ${time(
    new Date(sorted[0].t).toISOString(),
  )} to ${time(new Date(sorted.at(-1).t).toISOString())})`;
  figure.append(caption, svg);
  return figure;
}
