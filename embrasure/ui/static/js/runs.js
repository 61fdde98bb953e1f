// Runs as a table: state, times, duration, error, parent (the job and dataset pages and
// the home page list runs the same way).

import { get } from "./api.js";
import { h } from "./dom.js";
import { duration, time } from "./format.js";
import { runHref } from "./links.js";
import { entityLink } from "./names.js";
import { statisticsOf, statisticsText } from "./quality.js";
import { childTimeline } from "./timeline.js";

export function stateBadge(state) {
  const text = state || "UNKNOWN";
  return h("span", { class: `state state-${text.toLowerCase()}` }, text);
}

// A page of runs from a cursor-paginated listing, and a button that appends the next
// page (``next(cursor)`` fetches it) while there is one.
export function pagedRunTable(first, next, options = {}) {
  const table = runTable(first.runs, options);
  if (!first.next_cursor) return table;
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        const page = await next(cursor);
        table.tBodies[0].append(...page.runs.flatMap((run) => runRows(run, options.showJob)));
        cursor = page.next_cursor;
        more.hidden = !cursor;
      },
    },
    "Older runs",
  );
  return h("div", {}, table, h("p", {}, more));
}

// A run id, linked to its run page (pages/run.js).
export function runLink(runId, text = runId) {
  return h("a", { href: runHref(runId), class: "run-link", title: `run ${runId}` }, text);
}

export function runTable(runs, { showJob = false, caption = null } = {}) {
  if (!runs.length) return h("p", { class: "muted" }, "No runs.");
  return h(
    "table",
    { class: "runs" },
    caption ? h("caption", {}, caption) : null,
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        showJob ? h("th", {}, "Job") : null,
        h("th", {}, "State"),
        h("th", {}, "Started"),
        h("th", {}, "Ended"),
        h("th", { class: "num" }, "Duration"),
        h("th", {}, "Run"),
      ),
    ),
    h(
      "tbody",
      {},
      runs.map((run) => runRows(run, showJob)),
    ),
  );
}

function runRows(run, showJob) {
  const cells = [
    showJob ? h("td", {}, entityLink(run.job)) : null,
    h("td", {}, stateBadge(run.state)),
    h("td", {}, time(run.started_at)),
    h("td", {}, time(run.ended_at)),
    h("td", { class: "num" }, duration(run.duration_s)),
    h("td", { class: "mono small" }, runLink(run.runId)),
  ];
  const rows = [h("tr", { class: "run", dataset: { runId: run.runId } }, cells)];
  const details = runDetails(run);
  if (details) {
    const width = showJob ? 6 : 5;
    rows.push(h("tr", { class: "run-details" }, h("td", {}), h("td", { colspan: width }, details)));
  }
  return rows;
}

// What a full run view (GET /api/v1/runs) adds to a summary: its error, its parent and
// children, the datasets it read and wrote (with the rows, bytes and files it sent).
function runDetails(run) {
  const parts = [];
  if (run.error_message) {
    parts.push(h("pre", { class: "run-error", role: "note" }, run.error_message));
  }
  if (run.parent?.job) parts.push(parentOf(run.parent));
  if (run.child_count) parts.push(childRuns(run.runId, run.child_count));
  if (run.inputs || run.outputs) {
    // Each with what the run sent about it (rows, bytes, files: quality.js).
    const io = (list, role) =>
      list
        .map((d) => {
          const stats = statisticsText(statisticsOf(d, role));
          return d.name + (d.version ? ` @${d.version}` : "") + (stats ? ` (${stats})` : "");
        })
        .join(", ");
    if (run.inputs?.length)
      parts.push(h("span", { class: "io" }, `read ${io(run.inputs, "input")}`));
    if (run.outputs?.length)
      parts.push(h("span", { class: "io" }, `wrote ${io(run.outputs, "output")}`));
  }
  return parts.length ? h("div", { class: "run-extra" }, parts) : null;
}

// The parent run's job (an Airflow task's DAG, a Spark query's application, a dbt
// model's invocation) and, when it is another run, the root of the hierarchy
// (ParentRunFacet 1-1-0 `root`: the DAG run above a Spark application started by a task).
function parentOf(parent) {
  const link = (label, ref) =>
    h(
      "span",
      { class: label },
      `${label} `,
      entityLink(ref.job),
      ref.runId ? [" ", h("span", { class: "mono small" }, runLink(ref.runId))] : null,
    );
  const root = parent.root;
  const distinct = root?.job && (root.runId !== parent.runId || root.job.name !== parent.job.name);
  return h("span", {}, link("parent", parent), distinct ? [" ", link("root", root)] : null);
}

// A run's children (an Airflow DAG run's tasks, a Spark application's queries, a dbt
// invocation's models: tens of thousands for a large dbt project) are listed a page at
// a time when asked for, with their jobs, states and durations, and drawn as a timeline
// (timeline.js) that grows with each page. `open` loads the first page at once (the run
// page); otherwise a button says how many there are and loads them.
const CHILD_PAGE = 25;

export function childRuns(runId, count, { open = false } = {}) {
  const timeline = childTimeline();
  const list = h("ul", { class: "child-runs", "aria-label": "Child runs" });
  const more = h("button", { type: "button", class: "link", hidden: true }, "More child runs");
  let cursor = null;
  const load = async () => {
    more.disabled = true;
    const page = await get(`/api/v1/runs/${encodeURIComponent(runId)}/children`, {
      limit: CHILD_PAGE,
      cursor,
    });
    timeline.add(page.runs);
    list.append(
      ...page.runs.map((r) =>
        h(
          "li",
          {},
          stateBadge(r.state),
          " ",
          entityLink(r.job),
          " ",
          duration(r.duration_s),
          " ",
          h("span", { class: "mono small" }, runLink(r.runId, "run")),
        ),
      ),
    );
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
  };
  more.onclick = load;
  if (open) {
    load().catch((error) => list.replaceWith(h("p", { class: "error" }, error.message)));
    return h("div", { class: "children" }, timeline.element, list, more);
  }
  const button = h(
    "button",
    {
      type: "button",
      class: "link",
      "aria-expanded": "false",
      onclick: async () => {
        button.disabled = true;
        await load();
        button.setAttribute("aria-expanded", "true");
        button.hidden = true;
      },
    },
    `${count} child run${count === 1 ? "" : "s"}`,
  );
  return h("span", { class: "children" }, button, timeline.element, list, more);
}
