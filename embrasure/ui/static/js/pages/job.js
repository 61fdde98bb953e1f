// A job or a service: its runs (states, durations, errors, parent and children), its SQL
// and other facets, its inputs and outputs, and its lineage graph.

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { facetList } from "../facets.js";
import { lineageExplorer } from "../lineage.js";
import { namespaceHref } from "../links.js";
import { entityLink } from "../names.js";
import { pagedRunTable } from "../runs.js";

const RUNS = 25;

export async function render(params, page) {
  const namespace = params.get("namespace");
  const name = params.get("name");
  const { jobs } = await get("/api/v1/jobs", { namespace, name });
  const job = jobs[0];
  const [runs, around] = await Promise.all([
    get("/api/v1/runs", { namespace, name, limit: RUNS }),
    get("/api/v1/lineage", { type: job.type, namespace, name, depth: 1 }),
  ]);
  const explorer = lineageExplorer(job);
  append(page, [
    h(
      "p",
      { class: "crumb" },
      h("span", { class: `kind kind-${job.type}` }, job.type),
      " ",
      h("a", { href: namespaceHref(job.namespace) }, job.namespace),
    ),
    h("h1", {}, job.name),
    job.parent_job
      ? h(
          "p",
          {},
          "Part of ",
          entityLink(job.parent_job),
        )
      : null,
    io(around),
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

// Inputs and outputs from the edges around the job: dataset → job is a read, job →
// dataset a write (docs/queries.md#lineage), whether a run or a JobEvent declared them.
function io(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const link = (id) => {
    const node = byId.get(id);
    return h("li", {}, entityLink(node));
  };
  const inputs = graph.edges.filter((e) => e.target === graph.root).map((e) => link(e.source));
  const outputs = graph.edges.filter((e) => e.source === graph.root).map((e) => link(e.target));
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
