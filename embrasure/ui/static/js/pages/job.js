// A job or a service: its runs (states, durations, errors, parent and children), its SQL
// and other facets, its inputs and outputs, and its lineage graph. A parent job (an
// Airflow DAG, a dbt invocation) is drawn with the jobs under it (hierarchy.js): their
// lineage is the DAG's, and its inputs and outputs are theirs.

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { facetList } from "../facets.js";
import { descendants } from "../hierarchy.js";
import { lineageExplorer } from "../lineage.js";
import { namespaceHref, subscribeHref } from "../links.js";
import { entityLink } from "../names.js";
import { pagedRunTable } from "../runs.js";

const RUNS = 25;

export async function render(params, page) {
  const namespace = params.get("namespace");
  const name = params.get("name");
  const { jobs } = await get("/api/v1/jobs", { namespace, name });
  const job = jobs[0];
  const family = await descendants(job);
  const starts = [job, ...family.jobs.map((j) => ({ type: "job", ...j }))];
  const [runs, ...arounds] = await Promise.all([
    get("/api/v1/runs", { namespace, name, limit: RUNS }),
    ...starts.map((s) =>
      get("/api/v1/lineage", { type: s.type, namespace: s.namespace, name: s.name, depth: 1 }),
    ),
  ]);
  // Each start's node, as the lineage API names it (its id), for the graph.
  const nodeOf = new Map(
    arounds.map((g, i) => [key(starts[i]), g.nodes.find((n) => n.id === g.root)]),
  );
  const members = family.jobs.map((j) => nodeOf.get(key(j)));
  const explorer = lineageExplorer(job, {
    members,
    links: family.links.map(([p, c]) => [nodeOf.get(key(p)).id, nodeOf.get(key(c)).id]),
    membersTruncated: family.truncated,
  });
  append(page, [
    h(
      "p",
      { class: "crumb" },
      h("span", { class: `kind kind-${job.type}` }, job.type),
      " ",
      h("a", { href: namespaceHref(job.namespace) }, job.namespace),
      " · ",
      h("a", { href: subscribeHref("job", job.namespace, job.name) }, "Notify me"),
    ),
    h("h1", {}, job.name),
    job.parent_job ? h("p", {}, "Part of ", entityLink(job.parent_job)) : null,
    members.length ? familyNote(job, members, family.truncated) : null,
    io(arounds, new Set([job.id, ...members.map((m) => m.id)])),
    explorer.element,
    h(
      "section",
      { "aria-label": "Runs" },
      h("h2", {}, "Runs"),
      pagedRunTable(runs, (cursor) =>
        get("/api/v1/runs", { namespace, name, limit: RUNS, cursor }),
      ),
    ),
    h("section", { "aria-label": "Facets" }, h("h2", {}, "Facets"), facetList(job.facets)),
  ]);
  return explorer.destroy;
}

const key = (job) => `${job.namespace}\u0000${job.name}`;

function familyNote(job, members, truncated) {
  const plural = members.length === 1 ? "" : "s";
  const count = `${members.length}${truncated ? " (the first)" : ""} job${plural}`;
  return h(
    "p",
    { class: "family muted" },
    `Drawn with the ${count} under it in its latest run, each with its lineage; `,
    `inputs and outputs are those of ${job.name} as a whole.`,
  );
}

// Inputs and outputs from the edges around the job and the jobs under it: dataset → job
// is a read, job → dataset a write (docs/queries.md#lineage), whether a run or a JobEvent
// declared them. Of a family, a dataset one job writes and another reads is an output,
// not an input: its inputs are what comes from outside (a lone job that reads and writes
// one table lists it in both).
function io(graphs, jobs) {
  const byId = new Map(graphs.flatMap((g) => g.nodes).map((n) => [n.id, n]));
  const edges = graphs.flatMap((g) => g.edges);
  const written = new Set(edges.filter((e) => jobs.has(e.source)).map((e) => e.target));
  const read = new Set(edges.filter((e) => jobs.has(e.target)).map((e) => e.source));
  const link = (id) => h("li", {}, entityLink(byId.get(id)));
  const sorted = (ids) => [...ids].sort((a, b) => byId.get(a).name.localeCompare(byId.get(b).name));
  const outside = jobs.size > 1 ? [...read].filter((id) => !written.has(id)) : read;
  const inputs = sorted(outside).map(link);
  const outputs = sorted(written).map(link);
  return h(
    "div",
    { class: "io-lists" },
    h(
      "section",
      { "aria-label": "Inputs" },
      h("h2", {}, "Inputs"),
      inputs.length ? h("ul", {}, inputs) : h("p", { class: "muted" }, "None."),
    ),
    h(
      "section",
      { "aria-label": "Outputs" },
      h("h2", {}, "Outputs"),
      outputs.length ? h("ul", {}, outputs) : h("p", { class: "muted" }, "None."),
    ),
  );
}
