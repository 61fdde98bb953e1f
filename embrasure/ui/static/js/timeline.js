// A parent run's children as a timeline (docs/ui.md#a-run): one bar per child run, from
// its start to its end, coloured by its state as run badges are, each bar a link to the
// child's run page. An Airflow DAG run's tasks, a dbt invocation's models: when did each
// run, which overlapped, which one failed or is still going.
//
// The bars are HTML, placed in percent of the time span of the children loaded so far:
// each page of children (runs.js pages them) redraws them all on the wider span. Every
// bar carries its job, state and times as its accessible name and title, so a screen
// reader — or a test — reads the timeline without seeing it.

import { h } from "./dom.js";
import { duration, time } from "./format.js";
import { runHref } from "./links.js";
import { fullName, shortNamespace } from "./names.js";

const ms = (text) => (text ? new Date(text).getTime() : NaN);

export function childTimeline() {
  const runs = [];
  const rows = h("ol", { class: "timeline-rows" });
  const axis = h("div", { class: "timeline-axis muted small", "aria-hidden": "true" });
  const element = h(
    "figure",
    { class: "timeline", role: "group", "aria-label": "Child runs timeline", hidden: true },
    axis,
    rows,
  );

  function draw() {
    // A child with one time known is drawn at that time; one still running (no end) runs
    // past the latest time any child reached — the axis gets a tenth more for it, not up
    // to now, which for a run whose end was never sent could be months — and fades out.
    const times = runs.flatMap((r) => [ms(r.started_at), ms(r.ended_at)]).filter(Number.isFinite);
    element.hidden = times.length === 0;
    if (!times.length) return;
    const first = Math.min(...times);
    const known = Math.max(Math.max(...times) - first, 1000); // children of one instant: 1 s
    const anyOpen = runs.some((r) => !Number.isFinite(ms(r.ended_at)));
    const span = anyOpen ? known * 1.1 : known;
    const last = first + span;
    const at = (t) => ((t - first) / span) * 100;
    axis.replaceChildren(
      ...[0, 0.5, 1].map((f) => h("span", {}, time(new Date(first + f * span).toISOString()))),
    );
    rows.replaceChildren(
      ...runs.map((run) => {
        const start = ms(run.started_at);
        const end = ms(run.ended_at);
        const from = Number.isFinite(start) ? start : Number.isFinite(end) ? end : last;
        const open = !Number.isFinite(end);
        const to = open ? last : end;
        const state = (run.state || "other").toLowerCase();
        const label =
          `${fullName(run.job)}: ${run.state || "UNKNOWN"}, ` +
          `started ${time(run.started_at)}, ` +
          (open ? "no end yet" : `ended ${time(run.ended_at)} (${duration(run.duration_s)})`);
        const bar = h("a", {
          class: `bar state-${state}${open ? " open" : ""}`,
          href: runHref(run.runId),
          title: label,
          "aria-label": label,
          dataset: { runId: run.runId },
        });
        bar.style.left = `${at(from)}%`;
        bar.style.width = `max(${at(to) - at(from)}%, 4px)`;
        return h(
          "li",
          {},
          h(
            "span",
            { class: "timeline-label small", title: fullName(run.job) },
            run.job.name,
            " ",
            h("span", { class: "ns" }, shortNamespace(run.job.namespace)),
          ),
          h("span", { class: "timeline-track" }, bar),
        );
      }),
    );
  }

  return {
    element,
    add(page) {
      runs.push(...page);
      draw();
    },
  };
}
