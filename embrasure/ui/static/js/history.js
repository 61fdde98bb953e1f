// A dataset's run history (GET /api/v1/datasets/runs, docs/queries.md): the runs that
// read or wrote it, newest first, with what each did — rows written, checks passed and
// failed, schema changes against the previous write. The dataset page shows it as a chart
// of rows (and bytes) written per run, the list of schema changes, a table of runs and,
// when the latest check failed, which assertions on which columns.

import { get } from "./api.js";
import { timeChart } from "./chart.js";
import { h } from "./dom.js";
import { bytes, count, time } from "./format.js";
import { runHref } from "./links.js";
import { entityLink } from "./names.js";
import { checksCell, failedBadge, fieldText, statisticsText } from "./quality.js";
import { runLink, stateBadge } from "./runs.js";

export const HISTORY_PAGE = 20; // runs in the table at once
export const WRITES_PAGE = 100; // writes charted at once

export const history = (dataset, params) =>
  get("/api/v1/datasets/runs", { namespace: dataset.namespace, name: dataset.name, ...params });

const when = (run) => run.ended_at || run.started_at;
const checked = (run) => run.assertions && run.assertions.passed + run.assertions.failed > 0;

// The newest run that checked the dataset, if its check failed: which assertions, on which
// columns, by which run. `runs` is newest first.
export function qualityAlert(runs) {
  const latest = runs.find(checked);
  if (!latest || !latest.assertions.failed) return null;
  const failures = latest.assertions.failures || [];
  return h(
    "div",
    { class: "quality-alert", role: "alert" },
    h(
      "p",
      {},
      failedBadge(),
      ` The latest check failed: ${latest.assertions.failed} of `,
      `${latest.assertions.passed + latest.assertions.failed} assertions, by `,
      entityLink(latest.job),
      " (",
      runLink(latest.runId, "run"),
      `, ${time(when(latest))}).`,
    ),
    failures.length
      ? h(
          "ul",
          { class: "failures" },
          failures.map((f) =>
            h(
              "li",
              {},
              h("span", { class: "mono" }, String(f.assertion ?? "")),
              f.column ? [" on column ", h("span", { class: "mono" }, f.column)] : null,
            ),
          ),
        )
      : null,
  );
}

// The chart of rows and bytes written per run, and the schema changes between writes,
// over the writes loaded so far (`first`, then older pages on request).
export function writesSections(dataset, first) {
  const writes = [...first.runs];
  let cursor = first.next_cursor;
  const chartBody = h("div", { class: "charts" });
  const changes = h("div", {});
  const more = h(
    "button",
    {
      type: "button",
      hidden: !cursor,
      onclick: async () => {
        more.disabled = true;
        const page = await history(dataset, { role: "output", limit: WRITES_PAGE, cursor });
        writes.push(...page.runs);
        cursor = page.next_cursor;
        more.hidden = !cursor;
        more.disabled = false;
        draw();
      },
    },
    "Older writes",
  );
  function draw() {
    chartBody.replaceChildren(...charts(writes));
    changes.replaceChildren(schemaChanges(writes));
  }
  draw();
  return [
    h(
      "section",
      { class: "writes", "aria-label": "Rows written per run" },
      h("h2", {}, "Rows written per run"),
      chartBody,
      h("p", {}, more),
    ),
    h("section", { "aria-label": "Schema changes" }, h("h2", {}, "Schema changes"), changes),
  ];
}

function charts(writes) {
  if (!writes.length) return [h("p", { class: "muted" }, "No run wrote it.")];
  const points = (key, unit) =>
    writes
      .filter((r) => typeof r.statistics?.[key] === "number" && when(r))
      .map((r) => ({
        t: new Date(when(r)).getTime(),
        y: r.statistics[key],
        href: runHref(r.runId),
        state: r.state,
        label: `${time(when(r))}: ${unit(r.statistics[key])}, ${r.state || "UNKNOWN"}, ${r.job.name}`,
      }));
  const rows = points("rowCount", (n) => `${count(n)} row${n === 1 ? "" : "s"}`);
  const size = points("size", (n) => `${bytes(n)} written`);
  const out = [];
  if (rows.length) out.push(timeChart({ title: "Rows written", points: rows, format: count }));
  if (size.length)
    out.push(timeChart({ title: "Bytes written", points: size, format: bytes, binary: true }));
  const bare = writes.length - Math.max(rows.length, size.length);
  if (!out.length)
    out.push(h("p", { class: "muted" }, "No write sent outputStatistics (rows, bytes, files)."));
  else if (bare > 0)
    out.push(
      h(
        "p",
        { class: "muted small" },
        `${bare} of the ${writes.length} writes sent no outputStatistics: not charted.`,
      ),
    );
  return out;
}

function schemaChanges(writes) {
  const changed = writes.filter((r) => r.schema_change);
  if (!writes.length) return h("p", { class: "muted" }, "No run wrote it.");
  if (!changed.length)
    return h("p", { class: "muted" }, `No schema change in the ${writes.length} latest writes.`);
  return h(
    "ol",
    { class: "schema-changes", "aria-label": "Schema changes between writes" },
    changed.map((r) => {
      const c = r.schema_change;
      const parts = [];
      if (c.added?.length)
        parts.push(h("span", { class: "added" }, `added ${c.added.map(fieldText).join(", ")}`));
      if (c.removed?.length)
        parts.push(
          h("span", { class: "removed" }, `removed ${c.removed.map(fieldText).join(", ")}`),
        );
      for (const t of c.changed || [])
        parts.push(h("span", { class: "changed" }, `${t.name}: ${t.from ?? "—"} → ${t.to ?? "—"}`));
      return h(
        "li",
        {},
        h("span", { class: "muted small" }, time(when(r))),
        " ",
        entityLink(r.job),
        " ",
        runLink(r.runId, "run"),
        ": ",
        parts.flatMap((p, i) => (i ? ["; ", p] : [p])),
      );
    }),
  );
}

// The runs that read or wrote it, a page at a time.
export function historyTable(dataset, first) {
  if (!first.runs.length) return h("p", { class: "muted" }, "No runs.");
  const body = h("tbody", {}, first.runs.map(historyRow));
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      hidden: !cursor,
      onclick: async () => {
        more.disabled = true;
        const page = await history(dataset, { limit: HISTORY_PAGE, cursor });
        body.append(...page.runs.map(historyRow));
        cursor = page.next_cursor;
        more.hidden = !cursor;
        more.disabled = false;
      },
    },
    "Older runs",
  );
  const head = ["Role", "Job", "State", "Started", "Ended", "Did", "Checks", "Run"];
  return h(
    "div",
    {},
    h(
      "table",
      { class: "runs history" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          head.map((t) => h("th", {}, t)),
        ),
      ),
      body,
    ),
    h("p", {}, more),
  );
}

function historyRow(run) {
  const stats = statisticsText(run.statistics || {});
  return h(
    "tr",
    { class: `run role-${run.role}`, dataset: { runId: run.runId } },
    h("td", {}, run.role === "output" ? "wrote" : "read"),
    h("td", {}, entityLink(run.job)),
    h("td", {}, stateBadge(run.state)),
    h("td", {}, time(run.started_at)),
    h("td", {}, time(run.ended_at)),
    h("td", { class: "small" }, stats || h("span", { class: "muted" }, "—")),
    h("td", { class: "small" }, checksCell(run.assertions)),
    h("td", { class: "mono small" }, runLink(run.runId)),
  );
}
