// A dataset: its lineage graph, schema, facets, aliases, and its run history — rows and
// bytes written per run, schema changes, failed checks and the runs that read or wrote
// it (history.js).

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { facetList } from "../facets.js";
import { impactTable } from "../impact.js";
import { lineageExplorer } from "../lineage.js";
import { columnHref, datasetHref, namespaceHref, subscribeHref } from "../links.js";
import {
  HISTORY_PAGE,
  WRITES_PAGE,
  history,
  historyTable,
  qualityAlert,
  writesSections,
} from "../history.js";

export async function render(params, page) {
  const namespace = params.get("namespace");
  const name = params.get("name");
  const ref = { namespace, name };
  const [{ datasets }, runs, writes] = await Promise.all([
    get("/api/v1/datasets", ref),
    history(ref, { limit: HISTORY_PAGE }),
    history(ref, { role: "output", limit: WRITES_PAGE }),
  ]);
  // An alias opens the canonical dataset: page through its history under that name.
  const dataset = datasets[0];
  const explorer = lineageExplorer(dataset);
  append(page, [
    h(
      "p",
      { class: "crumb" },
      h("span", { class: "kind kind-dataset" }, "dataset"),
      " ",
      h("a", { href: namespaceHref(dataset.namespace) }, dataset.namespace),
      " · ",
      h("a", { href: subscribeHref("dataset", dataset.namespace, dataset.name) }, "Notify me"),
    ),
    h(
      "h1",
      {},
      dataset.name,
      dataset.dropped ? h("span", { class: "badge dropped" }, "dropped") : null,
    ),
    identities(dataset),
    qualityAlert(runs.runs),
    explorer.element,
    h(
      "div",
      { class: "columns" },
      h("section", { "aria-label": "Schema" }, h("h2", {}, "Schema"), schema(dataset)),
      h(
        "section",
        { "aria-label": "Facets" },
        h("h2", {}, "Facets"),
        facetList(dataset.facets, { elsewhere: shownElsewhere(dataset) }),
      ),
    ),
    writesSections(dataset, writes),
    h(
      "section",
      { "aria-label": "Runs that read or wrote it" },
      h("h2", {}, "Runs that read or wrote it"),
      historyTable(dataset, runs),
    ),
    impactSection(dataset),
  ]);
  return explorer.destroy;
}

// Everything downstream, fields included, can run to a thousand items: asked for only
// when the section is opened.
function impactSection(dataset) {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const section = h(
    "details",
    {
      class: "impact-section",
      ontoggle: async () => {
        if (!section.open || section.dataset.loaded) return;
        section.dataset.loaded = "yes";
        const params = { namespace: dataset.namespace, name: dataset.name, depth: 10 };
        try {
          body.replaceChildren(impactTable(await get("/api/v1/impact", params)));
        } catch (error) {
          body.replaceChildren(h("p", { class: "error" }, error.message));
        }
      },
    },
    h("summary", {}, h("h2", {}, "Impact downstream")),
    body,
  );
  return section;
}

// The facets this page draws in sections of their own, and where (a facet whose section
// has nothing to show stays in the facet list, as its JSON).
function shownElsewhere(dataset) {
  const out = {};
  if (hasIdentities(dataset)) out.symlinks = "shown above the graph (Also known as, Locations)";
  if (Array.isArray(dataset.facets.schema?.fields) && dataset.facets.schema.fields.length) {
    out.schema = "shown under Schema";
  }
  if (dataset.facets.columnLineage) {
    out.columnLineage = "shown in each field's column view (the links under Schema)";
  }
  return out;
}

const hasIdentities = (dataset) => dataset.aliases.length > 0 || dataset.locations.length > 0;

function identities(dataset) {
  if (!hasIdentities(dataset)) return null;
  return h(
    "dl",
    { class: "identities", "aria-label": "Identities" },
    dataset.aliases.length ? h("dt", {}, "Also known as") : null,
    dataset.aliases.map((a) =>
      h(
        "dd",
        {},
        h("a", { href: datasetHref(a.namespace, a.name) }, a.name),
        h("span", { class: "muted" }, ` ${a.namespace}`),
        a.renamed ? h("span", { class: "badge" }, "renamed") : null,
      ),
    ),
    dataset.locations.length ? h("dt", {}, "Locations") : null,
    dataset.locations.map((l) =>
      h(
        "dd",
        {},
        h("span", { class: "mono" }, `${l.namespace}/${l.name}`),
        h("span", { class: "muted" }, ` ${l.type}`),
      ),
    ),
  );
}

// The schema facet's fields (SchemaDatasetFacet 1-2-0: name, type, description, and
// nested `fields` for structs); each field opens its column lineage.
function schema(dataset) {
  const fields = dataset.facets.schema?.fields;
  if (!Array.isArray(fields) || !fields.length)
    return h("p", { class: "muted" }, "No schema facet.");
  const rows = [];
  const walk = (list, prefix) => {
    for (const f of list) {
      const path = prefix ? `${prefix}.${f.name}` : f.name;
      rows.push(
        h(
          "tr",
          {},
          h(
            "td",
            {},
            h(
              "a",
              { href: columnHref(dataset.namespace, dataset.name, path), class: "field-link" },
              path,
            ),
          ),
          h("td", { class: "mono" }, f.type ?? ""),
          h("td", {}, f.description ?? ""),
        ),
      );
      if (Array.isArray(f.fields)) walk(f.fields, path);
    }
  };
  walk(fields, "");
  return h(
    "table",
    { class: "schema" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "Field"), h("th", {}, "Type"), h("th", {}, "Description")),
    ),
    h("tbody", {}, rows),
  );
}
