// The column view: pick a field of a dataset, see its column lineage — mappings by class
// (direct / expression / aggregate), indirect dependencies dashed, masked mappings red —
// and its impact downstream (what breaks, and whether the path is masked).

import { get } from "../api.js";
import { createCanvas, draw } from "../canvas.js";
import { append, h } from "../dom.js";
import { impactTable } from "../impact.js";
import { columnHref, datasetHref, nodeHref } from "../links.js";

export async function render(params, page) {
  const namespace = params.get("namespace");
  const name = params.get("name");
  const field = params.get("field");
  const [{ datasets }, graph, impact] = await Promise.all([
    get("/api/v1/datasets", { namespace, name }),
    get("/api/v1/column-lineage", { namespace, name, field, depth: 10 }),
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
    fieldPicker(dataset, field),
    h(
      "section",
      { class: "lineage", "aria-label": "Column lineage" },
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

function fieldPicker(dataset, current) {
  const fields = dataset.fields.includes(current) ? dataset.fields : [current, ...dataset.fields];
  return h(
    "label",
    { class: "field-picker" },
    "Field ",
    h(
      "select",
      {
        "aria-label": "Field",
        onchange: (event) => {
          location.hash = columnHref(dataset.namespace, dataset.name, event.target.value);
        },
      },
      fields.map((f) => h("option", { value: f, selected: f === current }, f)),
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
      out.push({ group: "nodes", data: { id: group, label: node.name }, classes: "field-group" });
    }
    const classes = ["field"];
    if (node.id === graph.root) classes.push("root");
    out.push({
      group: "nodes",
      data: { id: node.id, parent: group, label: node.field },
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
  const label = (id) => {
    const n = byId.get(id);
    return `${n.name}.${n.field}`;
  };
  if (!graph.edges.length) return h("p", { class: "muted" }, "No column lineage for this field.");
  return h(
    "ol",
    { class: "graph-nodes column-edges", "aria-label": "Column lineage edges" },
    graph.edges.map((edge) =>
      h(
        "li",
        { class: `column-edge ${edgeClasses(edge)}`, dataset: { masked: String(edge.masked) } },
        h("a", { href: nodeHref(byId.get(edge.source)) }, label(edge.source)),
        " → ",
        h("a", { href: nodeHref(byId.get(edge.target)) }, label(edge.target)),
        " ",
        h(
          "span",
          { class: `cl-class cl-${edge.kind === "indirect" ? "indirect" : edge.class}` },
          // A mapping can carry INDIRECT subtypes too (a GROUP_BY key copied as is).
          edge.kind === "indirect" ? "indirect" : edge.class,
          edge.indirect.length ? ` ${edge.indirect.join(", ")}` : "",
        ),
        edge.masked
          ? h(
              "span",
              { class: "badge masked", title: "A masking transformation lies on this mapping" },
              "masked",
            )
          : null,
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
    item("edge-masked", "masked"),
  );
}
