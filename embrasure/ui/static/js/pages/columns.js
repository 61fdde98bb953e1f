// The column view: pick a field of a dataset, see its column lineage — mappings by class
// (direct / expression / aggregate), indirect dependencies dashed, masked mappings marked
// with a shield — and its impact downstream (what breaks, and whether the path is masked).
// Direction and depth are part of the address, like the field, so a view can be shared.

import { get } from "../api.js";
import { createCanvas, draw } from "../canvas.js";
import { append, h } from "../dom.js";
import { impactTable } from "../impact.js";
import { columnHref, datasetHref, nodeHref } from "../links.js";
import { entityLink, fullName, parseNodeId, shortNamespace } from "../names.js";

const DIRECTIONS = ["both", "upstream", "downstream"];
const MAX_DEPTH = 20; // the API's bound (docs/queries.md#lineage)

// What a masked mapping means, said on its badge and the legend: masking protects.
export const MASKED_TITLE =
  "Masked: on this mapping the value is hashed or masked (the columnLineage facet's " +
  "masking flag), so the raw value does not flow on along this path.";

export async function render(params, page) {
  const namespace = params.get("namespace");
  const name = params.get("name");
  const field = params.get("field");
  const direction = DIRECTIONS.includes(params.get("direction")) ? params.get("direction") : "both";
  const depth = Math.max(1, Math.min(MAX_DEPTH, Number(params.get("depth")) || 10));
  const [{ datasets }, graph, impact] = await Promise.all([
    get("/api/v1/datasets", { namespace, name }),
    get("/api/v1/column-lineage", { namespace, name, field, direction, depth }),
    get("/api/v1/impact", { namespace, name, field, depth: 10 }),
  ]);
  const dataset = datasets[0];
  const canvas = h("div", {
    class: "canvas",
    role: "img",
    "aria-label": `Column lineage of ${name}.${field}`,
  });
  const cy = createCanvas(canvas, {
    onTap: (id) => {
      const node = graph.nodes.find((n) => n.id === id);
      if (node && id !== graph.root) location.hash = nodeHref(node);
    },
  });
  append(page, [
    h(
      "p",
      { class: "crumb" },
      h("span", { class: "kind kind-field" }, "field"),
      " ",
      h("a", { href: datasetHref(dataset.namespace, dataset.name) }, dataset.name),
    ),
    h("h1", {}, `${dataset.name}.${field}`),
    h(
      "section",
      { class: "lineage", "aria-label": "Column lineage" },
      controls(dataset, field, { direction, depth }),
      h(
        "div",
        { class: "graph-area" },
        canvas,
        h("aside", { class: "graph-side" }, edgeList(graph)),
      ),
      graph.truncated
        ? h(
            "p",
            { class: "muted" },
            "The server stopped at its node limit: not every field is shown.",
          )
        : null,
      legend(),
    ),
    h("section", { "aria-label": "Impact" }, h("h2", {}, "Impact downstream"), impactTable(impact)),
  ]);
  draw(cy, elements(graph));
  return () => cy.destroy();
}

// The field, the direction and the depth of the walk: each change is a new address.
function controls(dataset, current, walk) {
  const fields = dataset.fields.includes(current) ? dataset.fields : [current, ...dataset.fields];
  const go = (change) => {
    const next = { field: current, ...walk, ...change };
    location.hash = columnHref(dataset.namespace, dataset.name, next.field, {
      direction: next.direction,
      depth: next.depth,
    });
  };
  return h(
    "form",
    { class: "toolbar", onsubmit: (event) => event.preventDefault() },
    h(
      "label",
      { class: "field-picker" },
      "Field ",
      h(
        "select",
        { "aria-label": "Field", onchange: (event) => go({ field: event.target.value }) },
        fields.map((f) => h("option", { value: f, selected: f === current }, f)),
      ),
    ),
    h(
      "label",
      {},
      "Direction ",
      h(
        "select",
        {
          "aria-label": "Direction",
          onchange: (event) => go({ direction: event.target.value }),
        },
        DIRECTIONS.map((d) => h("option", { value: d, selected: d === walk.direction }, d)),
      ),
    ),
    h(
      "label",
      {},
      "Depth ",
      h("input", {
        type: "number",
        min: 1,
        max: MAX_DEPTH,
        value: walk.depth,
        "aria-label": "Depth",
        title: "Field → field edges walked from this field",
        onchange: (event) => go({ depth: event.target.value }),
      }),
    ),
  );
}

// Field nodes drawn inside a box per dataset (cytoscape compound nodes).
function elements(graph) {
  const out = [];
  const groups = new Set();
  for (const node of graph.nodes) {
    const group = `group:${node.namespace}:${node.name}`;
    if (!groups.has(group)) {
      groups.add(group);
      const label = `${node.name} · ${shortNamespace(node.namespace)}`;
      const full = fullName({ namespace: node.namespace, name: node.name });
      out.push({ group: "nodes", data: { id: group, label, full }, classes: "field-group" });
    }
    const classes = ["field"];
    if (node.id === graph.root) classes.push("root");
    out.push({
      group: "nodes",
      data: { id: node.id, parent: group, label: node.field, full: fullName(node) },
      classes: classes.join(" "),
    });
  }
  for (const edge of graph.edges) {
    out.push({
      group: "edges",
      data: { id: edgeId(edge), source: edge.source, target: edge.target },
      classes: edgeClasses(edge),
    });
  }
  return out;
}

const edgeId = (edge) => `${edge.source}→${edge.target}@${edge.job}`;

function edgeClasses(edge) {
  const classes = [edge.kind === "indirect" ? "indirect" : edge.class];
  if (edge.masked) classes.push("masked");
  return classes.join(" ");
}

// The edges as a list: what the canvas shows, readable by a screen reader and a test.
function edgeList(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const field = (id) => {
    const n = byId.get(id);
    return entityLink(n, { text: `${n.name}.${n.field}` });
  };
  if (!graph.edges.length) return h("p", { class: "muted" }, "No column lineage for this field.");
  return h(
    "ol",
    { class: "graph-nodes column-edges", "aria-label": "Column lineage edges" },
    graph.edges.map((edge) =>
      h(
        "li",
        { class: `column-edge ${edgeClasses(edge)}`, dataset: { masked: String(edge.masked) } },
        field(edge.source),
        " → ",
        field(edge.target),
        // The job the mapping goes through, as `embrasure graph --field` names it.
        edge.job
          ? h("span", { class: "via small" }, " via ", entityLink(parseNodeId(edge.job)))
          : null,
        " ",
        h(
          "span",
          { class: `cl-class cl-${edge.kind === "indirect" ? "indirect" : edge.class}` },
          // A mapping can carry INDIRECT subtypes too (a GROUP_BY key copied as is).
          edge.kind === "indirect" ? "indirect" : edge.class,
          edge.indirect.length ? ` ${edge.indirect.join(", ")}` : "",
        ),
        edge.masked ? h("span", { class: "badge masked", title: MASKED_TITLE }, "masked") : null,
        edge.derived ? h("span", { class: "badge" }, `from ${edge.derived}`) : null,
      ),
    ),
  );
}

function legend() {
  const item = (cls, text) => h("li", {}, h("span", { class: `swatch ${cls}` }), text);
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    item("edge-direct", "direct"),
    item("edge-expression", "expression"),
    item("edge-aggregate", "aggregate"),
    item("edge-indirect", "indirect (join, filter, group by…)"),
    h(
      "li",
      { title: MASKED_TITLE },
      h("span", { class: "swatch edge-masked" }),
      "masked (protected: value hashed or masked)",
    ),
  );
}
