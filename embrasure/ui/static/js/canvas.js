// The graph canvas: cytoscape.js with the dagre layered layout, left to right (data flows
// rightwards: upstream on the left). One style sheet for the lineage and the column
// views; what an element looks like is set by its classes (its type, a run state, a
// column-lineage class, masked), so the legend and the styles say the same thing.

import cytoscape from "../vendor/cytoscape.esm.min.mjs";
import dagre from "../vendor/cytoscape-dagre.min.mjs";

cytoscape.use(dagre);

const INK = "#1f2933";
const STATE = {
  complete: "#3f8f5b",
  fail: "#c9362b",
  abort: "#d48a1b",
  running: "#2f6fcb",
  start: "#2f6fcb",
  other: "#8a94a3",
};

const STYLE = [
  {
    selector: "node",
    style: {
      shape: "round-rectangle",
      width: 190,
      height: 38,
      "background-color": "#ffffff",
      "border-width": 1.5,
      "border-color": "#9aa5b1",
      label: "data(label)",
      "font-family": "Inter, system-ui, sans-serif",
      "font-size": 12,
      color: INK,
      "text-valign": "center",
      "text-halign": "center",
      "text-wrap": "ellipsis",
      "text-max-width": 176,
    },
  },
  {
    selector: "node[w]",
    style: {
      width: "data(w)",
      height: "data(h)",
      "text-wrap": "wrap",
      "text-max-width": (node) => node.data("w") - 14,
      "text-overflow-wrap": "anywhere",
      "line-height": 1.25,
    },
  },
  { selector: "node.dataset", style: { "background-color": "#eef4fb", "border-color": "#5b8bc9" } },
  {
    selector: "node.job",
    style: { shape: "rectangle", "background-color": "#f4f0fa", "border-color": "#8466c4" },
  },
  {
    selector: "node.service",
    style: { shape: "cut-rectangle", "background-color": "#fdf3e7", "border-color": "#c98a3c" },
  },
  {
    // What the walks stopped at outside the reader's grants (docs/security.md).
    selector: "node.hidden",
    style: {
      shape: "round-rectangle",
      "background-color": "#f2f2f2",
      "border-color": "#7b8794",
      "border-style": "dashed",
      color: "#52606d",
    },
  },
  { selector: "edge.hidden", style: { "line-style": "dashed", "line-color": "#9aa5b1" } },
  { selector: "node.member", style: { "border-width": 2.5 } },
  { selector: "node.dropped", style: { "border-style": "dashed", color: "#7b8794" } },
  {
    selector: "node.root",
    style: { "border-width": 3.5, "border-color": INK, "font-weight": 600 },
  },
  {
    selector: "node.summary",
    style: {
      shape: "round-rectangle",
      width: 130,
      "background-color": "#fff7e0",
      "border-color": "#d48a1b",
      "border-style": "dashed",
      "font-weight": 600,
      "font-size": 14,
      color: "#8a5a00",
    },
  },
  {
    selector: "node.field-group",
    style: {
      shape: "round-rectangle",
      "background-color": "#f7f9fc",
      "border-color": "#c5cfdb",
      "text-valign": "top",
      "text-halign": "center",
      "font-size": 11,
      color: "#52606d",
      padding: 10,
      "text-max-width": 320, // the dataset and its namespace, above the box: room to spare
    },
  },
  {
    selector: "node.field",
    style: { width: 150, height: 28, "font-size": 11, "text-max-width": 140 },
  },
  {
    selector: "node:selected",
    style: { "overlay-color": "#2f6fcb", "overlay-opacity": 0.15, "overlay-padding": 4 },
  },
  // A dataset whose latest data-quality check failed: the alarm red, drawn over the root's
  // border colour (its box also says "✗ check failed", lineage.js nodeData).
  {
    selector: "node.quality-failed",
    style: { "background-color": "#fdecea", "border-color": STATE.fail, "border-width": 3 },
  },
  { selector: "node.root.quality-failed", style: { "border-width": 4 } },
  { selector: "node.highlight", style: { "border-color": "#f0b429", "border-width": 4 } },
  {
    selector: "edge",
    style: {
      width: 1.6,
      "curve-style": "bezier",
      "line-color": "#9aa5b1",
      "target-arrow-color": "#9aa5b1",
      "target-arrow-shape": "triangle",
      "arrow-scale": 0.9,
    },
  },
  ...Object.entries(STATE).map(([state, color]) => ({
    selector: `edge.state-${state}`,
    style: { "line-color": color, "target-arrow-color": color },
  })),
  { selector: "edge.static", style: { "line-style": "dotted" } },
  { selector: "edge.summary", style: { "line-style": "dotted", "line-color": "#c5cfdb" } },
  // A parent job → a child job (a DAG → its task): not data, so light, dashed, with a
  // diamond at the parent (UML's composition).
  {
    selector: "edge.part",
    style: {
      "line-style": "dashed",
      "line-color": "#b8a6e0",
      "target-arrow-shape": "none",
      "source-arrow-shape": "diamond",
      "source-arrow-color": "#b8a6e0",
      width: 1.3,
    },
  },
  // Column lineage (docs/projection.md#column-lineage): the class of a mapping, indirect dependencies dashed,
  // masked mappings in a calm teal with a marker: masking is the protected case, not an alarm.
  {
    selector: "edge.direct",
    style: { "line-color": "#2f6fcb", "target-arrow-color": "#2f6fcb", width: 2 },
  },
  {
    selector: "edge.expression",
    style: { "line-color": "#8466c4", "target-arrow-color": "#8466c4", width: 2 },
  },
  {
    selector: "edge.aggregate",
    style: { "line-color": "#d48a1b", "target-arrow-color": "#d48a1b", width: 3 },
  },
  {
    selector: "edge.indirect",
    style: {
      "line-style": "dashed",
      "line-color": "#8a94a3",
      "target-arrow-color": "#8a94a3",
      width: 1.4,
    },
  },
  {
    selector: "edge.masked",
    style: {
      "line-color": "#2a7f8f",
      "target-arrow-color": "#2a7f8f",
      "source-arrow-shape": "circle",
      "source-arrow-color": "#2a7f8f",
      label: "masked",
      "font-size": 10,
      color: "#1f5f6b",
      "text-background-color": "#ffffff",
      "text-background-opacity": 1,
      "text-background-padding": 2,
    },
  },
];

export function createCanvas(container, { onTap, onDoubleTap } = {}) {
  const cy = cytoscape({
    container,
    style: STYLE,
    layout: { name: "null" }, // nothing to lay out yet; draw() runs dagre
    minZoom: 0.1,
    maxZoom: 3,
    boxSelectionEnabled: false,
    // Labels are skipped while panning a big graph, so 500 nodes still drag smoothly.
    hideLabelsOnViewport: true,
    textureOnViewport: true,
  });
  // Pages are built off-screen and attached when their data is in: lay out again once
  // the canvas has a size (cytoscape measures its container).
  let wasEmpty = true;
  new ResizeObserver(() => {
    const empty = container.clientWidth === 0;
    cy.resize();
    if (wasEmpty && !empty) frame(cy);
    wasEmpty = empty;
  }).observe(container);
  // The canvas has no DOM per node: the whole name of the node under the pointer is the
  // container's title, so hovering a box shows it as hovering a link does.
  cy.on("mouseover", "node", (event) => {
    container.title = event.target.data("full") || event.target.data("label") || "";
  });
  cy.on("mouseout", "node", () => container.removeAttribute("title"));
  if (onTap) cy.on("tap", "node", (event) => onTap(event.target.id()));
  if (onDoubleTap) cy.on("dbltap", "node", (event) => onDoubleTap(event.target.id()));
  return cy;
}

export function draw(cy, elements) {
  cy.batch(() => {
    cy.elements().remove();
    cy.add(elements);
  });
  cy.layout({
    name: "dagre",
    rankDir: "LR",
    nodeSep: 14,
    rankSep: 70,
    edgeSep: 8,
    animate: false,
    fit: true,
    padding: 24,
  }).run();
  // As tall as the graph needs (within bounds), so a chain of five nodes is not a strip
  // in an empty box and a big graph still leaves the page below it in reach.
  const height = cy.elements().boundingBox().h * 1.2 + 60;
  cy.container().style.height = `${Math.round(Math.max(220, Math.min(620, height)))}px`;
  cy.resize();
  frame(cy);
}

// Fit the graph, but never so small that labels cannot be read, nor so big that three
// nodes fill the screen: past those, centre on the root and let the user pan.
function frame(cy) {
  cy.fit(undefined, 24);
  if (cy.zoom() > 1.2) {
    cy.zoom(1.2);
    cy.center();
  } else if (cy.zoom() < 0.5) {
    const root = cy.$(".root");
    cy.zoom(0.5);
    cy.center(root.length ? root : undefined);
    // A root at the graph's edge (a DAG drawn from its left) leaves half the canvas
    // empty: slide the graph back so it starts at the padding.
    const box = cy.elements().renderedBoundingBox();
    cy.panBy({ x: Math.min(0, 24 - box.x1), y: Math.min(0, 24 - box.y1) });
  }
}

// The nodes in reading order: left to right by layer, then top to bottom.
export function readingOrder(cy, ids) {
  return [...ids].sort((a, b) => {
    const pa = cy.getElementById(a).position();
    const pb = cy.getElementById(b).position();
    return pa.x - pb.x || pa.y - pb.y;
  });
}
