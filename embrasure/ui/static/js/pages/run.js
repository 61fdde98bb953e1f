// One run (GET /api/v1/runs/{runId}): its state and times, parent and root, error, child
// runs as a timeline and a list, and what it read and wrote — each dataset with the
// statistics, data-quality assertions and schema the run sent, then every other facet
// (docs/ui.md#a-run).

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { facetList } from "../facets.js";
import { duration, time } from "../format.js";
import { entityLink } from "../names.js";
import {
  ROLE_FACETS,
  assertionTable,
  assertionsOf,
  failedBadge,
  fieldText,
  statisticsOf,
  statisticsText,
} from "../quality.js";
import { childRuns, runLink, stateBadge } from "../runs.js";

export async function render(params, page) {
  const id = params.get("id");
  const run = await get(`/api/v1/runs/${encodeURIComponent(id)}`);
  append(page, [
    h(
      "p",
      { class: "crumb" },
      h("span", { class: "kind kind-run" }, "run"),
      " of ",
      entityLink(run.job),
    ),
    h("h1", {}, `Run of ${run.job.name}`),
    summary(run),
    run.error_message ? h("pre", { class: "run-error", role: "note" }, run.error_message) : null,
    run.child_count
      ? h(
          "section",
          { "aria-label": "Child runs" },
          h("h2", {}, `Child runs `, h("span", { class: "count" }, `(${run.child_count})`)),
          childRuns(run.runId, run.child_count, { open: true }),
        )
      : null,
    h(
      "div",
      { class: "io-lists" },
      ioSection("Read", run.inputs, "input"),
      ioSection("Wrote", run.outputs, "output"),
    ),
    h(
      "section",
      { "aria-label": "Run facets" },
      h("h2", {}, "Run facets"),
      facetList(run.facets, { elsewhere: shownAbove(run) }),
    ),
  ]);
}

function summary(run) {
  const row = (term, ...value) => [h("dt", {}, term), h("dd", {}, ...value)];
  const ref = (label, r) =>
    row(label, r.job ? entityLink(r.job) : null, r.runId ? [" ", runLink(r.runId)] : null);
  const parent = run.parent;
  const root = parent?.root;
  const rootDistinct = root && (root.runId !== parent.runId || root.job?.name !== parent.job?.name);
  return h(
    "dl",
    { class: "run-summary", "aria-label": "Run" },
    row("State", stateBadge(run.state)),
    row("Started", time(run.started_at)),
    row("Ended", time(run.ended_at)),
    row("Duration", duration(run.duration_s)),
    row("Run id", h("span", { class: "mono small" }, run.runId)),
    parent ? ref("Parent", parent) : null,
    rootDistinct ? ref("Root", root) : null,
  );
}

function shownAbove(run) {
  const out = {};
  if (run.facets?.errorMessage && run.error_message) out.errorMessage = "shown above";
  if (run.facets?.parent && run.parent) out.parent = "shown above (Parent, Root)";
  return out;
}

function ioSection(title, list, role) {
  return h(
    "section",
    { "aria-label": title },
    h("h2", {}, title),
    list?.length
      ? h(
          "ul",
          { class: "run-io" },
          list.map((entry) => ioEntry(entry, role)),
        )
      : h("p", { class: "muted" }, "None."),
  );
}

// One dataset the run read or wrote: the statistics, assertions and schema first (what
// an on-call engineer looks for: rows written, which check failed), then the rest.
function ioEntry(entry, role) {
  const node = { type: "dataset", namespace: entry.namespace, name: entry.name };
  const stats = statisticsText(statisticsOf(entry, role));
  const assertions = assertionsOf(entry);
  const failures = assertions.filter((a) => a.success === false).length;
  const fields = Array.isArray(entry.facets?.schema?.fields) ? entry.facets.schema.fields : [];
  const own = entry[ROLE_FACETS[role]] || {};
  // The facets drawn above are not repeated as JSON, but said to be there.
  const elsewhere = {};
  if (fields.length) elsewhere.schema = "shown above (schema)";
  if (assertions.length) elsewhere.dataQualityAssertions = "shown above (the assertions table)";
  if (stats) elsewhere[role === "output" ? "outputStatistics" : "inputStatistics"] = "shown above";
  const facetCount = Object.keys(entry.facets || {}).length + Object.keys(own).length;
  return h(
    "li",
    {
      class: failures ? "io-entry failed" : "io-entry",
      "aria-label": `${title(role)} ${entry.name}`,
    },
    h(
      "p",
      { class: "io-name" },
      entityLink(node),
      entry.version ? h("span", { class: "muted small" }, ` @${entry.version}`) : null,
      failures ? failedBadge(`${failures} check${failures === 1 ? "" : "s"} failed`) : null,
    ),
    stats ? h("p", { class: "stats" }, stats) : null,
    assertions.length ? assertionTable(assertions) : null,
    fields.length
      ? h(
          "p",
          { class: "run-schema small" },
          h("span", { class: "muted" }, "schema: "),
          fields.map(fieldText).join(", "),
        )
      : null,
    facetCount
      ? h(
          "details",
          { class: "io-facets" },
          h("summary", {}, `Facets (${facetCount})`),
          h("h3", {}, "Dataset facets"),
          facetList(entry.facets, { elsewhere: pick(entry.facets, elsewhere) }),
          h("h3", {}, role === "input" ? "Input facets" : "Output facets"),
          facetList(own, { elsewhere: pick(own, elsewhere) }),
        )
      : null,
  );
}

const title = (role) => (role === "input" ? "Read" : "Wrote");

const pick = (facets, notes) =>
  Object.fromEntries(Object.entries(notes).filter(([name]) => name in (facets || {})));
