// The lineage explorer of the dataset and job pages: the graph around one node, with
// upstream and downstream depth, run-state and time filters, expand and collapse of a
// node's neighbours, and "+N more" for big neighbourhoods (summarize.js).
//
// A parent job (an Airflow DAG) has no lineage edge of its own: its page passes the jobs
// under it as `members` and the parent → child pairs as `links` (hierarchy.js). Each
// member is walked like the root, and each link is drawn as a "part of" edge, so the
// DAG is drawn as its tasks and their data.
//
// Every drawn node is also an item of a plain list beside the canvas (a link and an
// Expand button), so a screen reader — or a test — finds the graph in the DOM, not only
// as pixels (docs/ui.md).

import { get } from "./api.js";
import { createCanvas, draw, readingOrder } from "./canvas.js";
import { h } from "./dom.js";
import { nodeHref } from "./links.js";
import { fullName, shortNamespace } from "./names.js";
import { failedBadge } from "./quality.js";
import { summarize } from "./summarize.js";

const STATES = ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"];
const PAGE_LIMIT = 500; // nodes per request: what the canvas lays out without freezing

export function lineageExplorer(
  rootNode,
  { members = [], links = [], membersTruncated = false } = {},
) {
  // A DAG starts from each of its jobs: one edge each way is already the whole DAG with
  // its inputs and outputs; two would pull in every neighbour's neighbours.
  const start = members.length ? 1 : 2;
  const view = {
    up: start,
    down: start,
    states: new Set(),
    asOf: "",
    nodes: new Map(), // id → node, as the API returns them
    edges: new Map(), // "source→target" → edge
    base: new Set(), // the nodes of the last load
    expanded: new Map(), // id → the ids its expansion added
    openedHubs: new Set(), // "id|up" summaries the user opened
    truncated: false,
    loads: 0, // a newer load (a filter changed again) wins over a slower, older one
  };
  const rootId = rootNode.id;
  const memberIds = new Set(members.map((m) => m.id));

  const status = h("p", { class: "graph-status muted", "aria-live": "polite" });
  const canvas = h("div", {
    class: "canvas",
    role: "img",
    "aria-label": `Lineage graph of ${fullName(rootNode)}`,
  });
  const list = h("ol", { class: "graph-nodes", "aria-label": "Nodes in the lineage graph" });
  const details = h("div", { class: "node-details" });
  const cy = createCanvas(canvas, {
    onTap: (id) => select(id),
    onDoubleTap: (id) => toggle(id),
  });

  function depthInput(label, key) {
    return h(
      "label",
      {},
      label,
      h("input", {
        type: "number",
        min: 0,
        max: 20,
        value: view[key],
        "aria-label": `${label} depth`,
        onchange: (event) => {
          view[key] = Math.max(0, Math.min(20, Number(event.target.value) || 0));
          load();
        },
      }),
    );
  }

  // No box ticked is no filter: the hint says so, and which states are kept otherwise.
  const statesHint = h("span", { class: "states-hint muted small", "aria-live": "polite" });
  const showStates = () => {
    statesHint.textContent = view.states.size
      ? `only edges whose last run is ${[...view.states].join(" or ")}`
      : "none ticked: all states";
  };
  showStates();

  // As of: typed as ISO 8601 and read as UTC whatever the browser's zone (a
  // datetime-local picker shows local, often 12-hour, wall time without saying which).
  const asOfInput = h("input", {
    id: `as-of-${rootId}`,
    type: "text",
    inputmode: "numeric",
    spellcheck: "false",
    autocomplete: "off",
    size: 21,
    placeholder: "YYYY-MM-DDTHH:MM:SSZ",
    "aria-describedby": `as-of-help-${rootId}`,
    onchange: () => applyAsOf(),
  });
  function applyAsOf() {
    const text = asOfInput.value.trim();
    const value = text ? utcInstant(text) : "";
    if (value === null) {
      asOfInput.setAttribute("aria-invalid", "true");
      status.textContent = `As of: "${text}" is not a time; write it like 2026-01-15T02:30:00Z`;
      return;
    }
    asOfInput.removeAttribute("aria-invalid");
    asOfInput.value = value; // shown back as the API reads it: ISO 8601, UTC, with Z
    if (value === view.asOf) return;
    view.asOf = value;
    load();
  }

  const toolbar = h(
    "form",
    {
      class: "toolbar",
      onsubmit: (event) => {
        event.preventDefault();
        applyAsOf(); // Enter in the As of box
      },
    },
    depthInput("Upstream", "up"),
    depthInput("Downstream", "down"),
    h(
      "fieldset",
      { class: "states" },
      h("legend", {}, "Last run state"),
      STATES.map((state) =>
        h(
          "label",
          { class: `state-choice state-${state.toLowerCase()}` },
          h("input", {
            type: "checkbox",
            value: state,
            onchange: (event) => {
              if (event.target.checked) view.states.add(state);
              else view.states.delete(state);
              showStates();
              load();
            },
          }),
          state,
        ),
      ),
      statesHint,
    ),
    h(
      "span",
      { class: "as-of" },
      h("label", { for: `as-of-${rootId}` }, "As of (UTC)"),
      asOfInput,
      h(
        "span",
        { id: `as-of-help-${rootId}`, class: "muted small" },
        "ISO 8601, read as UTC; empty: now",
      ),
    ),
    h(
      "span",
      { class: "zoom" },
      h("button", { type: "button", "aria-label": "Zoom in", onclick: () => zoomBy(1.25) }, "+"),
      h("button", { type: "button", "aria-label": "Zoom out", onclick: () => zoomBy(0.8) }, "−"),
      h("button", { type: "button", onclick: () => cy.fit(undefined, 24) }, "Fit"),
    ),
  );

  const element = h(
    "section",
    { class: "lineage", "aria-label": "Lineage" },
    toolbar,
    h("div", { class: "graph-area" }, canvas, h("aside", { class: "graph-side" }, details, list)),
    status,
    legend(members.length > 0),
  );

  // The buttons zoom about the centre of the canvas, as the wheel does about the pointer.
  function zoomBy(factor) {
    const renderedPosition = { x: cy.width() / 2, y: cy.height() / 2 };
    cy.zoom({ level: cy.zoom() * factor, renderedPosition });
  }

  function params(extra) {
    return {
      states: [...view.states].join(","),
      asOf: view.asOf,
      limit: PAGE_LIMIT,
      ...extra,
    };
  }

  function nodeParams(node) {
    return { type: node.type, namespace: node.namespace, name: node.name };
  }

  function merge(graph) {
    for (const node of graph.nodes) {
      const known = view.nodes.get(node.id);
      if (node.type === "hidden") {
        // One placeholder for what the walks stopped at outside the reader's grants
        // (docs/security.md#what-a-reader-sees): the largest count any walk gave, beside
        // every shown node any walk met it from.
        const kept = known && known.count >= node.count ? known : node;
        const nextTo = new Set([...(known ? known.next_to : []), ...node.next_to]);
        view.nodes.set(node.id, { ...kept, next_to: [...nextTo] });
        for (const id of nextTo) {
          view.edges.set(`${id}→${node.id}`, { source: id, target: node.id, hidden: true });
        }
      } else if (!known) view.nodes.set(node.id, node);
    }
    for (const edge of graph.edges) view.edges.set(`${edge.source}→${edge.target}`, edge);
    view.truncated ||= graph.truncated;
    return graph.nodes.map((n) => n.id);
  }

  async function load() {
    status.textContent = "Loading…";
    const walks = [];
    for (const start of [rootNode, ...members]) {
      const base = nodeParams(start);
      if (view.up)
        walks.push(
          get("/api/v1/lineage", params({ ...base, direction: "upstream", depth: view.up })),
        );
      if (view.down)
        walks.push(
          get("/api/v1/lineage", params({ ...base, direction: "downstream", depth: view.down })),
        );
      if (!view.up && !view.down) walks.push(get("/api/v1/lineage", params({ ...base, depth: 0 })));
    }
    const mine = ++view.loads;
    try {
      const graphs = await Promise.all(walks);
      if (mine !== view.loads) return;
      view.nodes.clear();
      view.edges.clear();
      view.expanded.clear();
      view.truncated = false;
      view.base = new Set(graphs.flatMap(merge));
      for (const [source, target] of links) {
        view.edges.set(`${source}→${target}`, { source, target, part: true });
      }
      render();
    } catch (error) {
      if (mine !== view.loads) return;
      status.textContent = `Could not load the lineage: ${error.message}`;
    }
  }

  async function toggle(id) {
    const node = view.nodes.get(id);
    if (!node || node.type === "hidden") return;
    if (view.expanded.has(id)) {
      collapse(id);
      return render();
    }
    status.textContent = `Expanding ${node.name}…`;
    // A dataset's neighbours are jobs: walk two edges so the next datasets show too.
    const depth = node.type === "dataset" ? 2 : 1;
    const before = new Set(view.nodes.keys());
    let graph;
    try {
      graph = await get(
        "/api/v1/lineage",
        params({ ...nodeParams(node), direction: "both", depth }),
      );
    } catch (error) {
      status.textContent = `Could not expand ${node.name}: ${error.message}`;
      return;
    }
    const added = merge(graph).filter((n) => !before.has(n));
    view.expanded.set(id, added);
    // Show everything the user asked for, however big the neighbourhood.
    view.openedHubs.add(`${id}|up`).add(`${id}|down`);
    render();
  }

  function collapse(id) {
    const added = view.expanded.get(id) || [];
    view.expanded.delete(id);
    view.openedHubs.delete(`${id}|up`);
    view.openedHubs.delete(`${id}|down`);
    const kept = new Set([...view.expanded.values()].flat());
    for (const n of added) {
      if (!view.base.has(n) && !kept.has(n) && n !== rootId) view.nodes.delete(n);
    }
    for (const [key, edge] of view.edges) {
      if (!view.nodes.has(edge.source) || !view.nodes.has(edge.target)) view.edges.delete(key);
    }
  }

  function select(id) {
    if (id.startsWith("more:")) {
      view.openedHubs.add(id.slice(5));
      return render();
    }
    const node = view.nodes.get(id);
    if (node.type === "hidden") return; // nothing to open: its nodes are not named
    cy.$("node").unselect();
    cy.getElementById(id).select();
    details.replaceChildren(
      h("h3", {}, node.name),
      h("p", { class: "muted small full-name" }, `${node.type} · ${fullName(node)}`),
      h(
        "p",
        {},
        h("a", { href: nodeHref(node) }, "Open page"),
        " ",
        h(
          "button",
          { type: "button", onclick: () => toggle(id) },
          view.expanded.has(id) ? "Collapse" : "Expand",
        ),
      ),
    );
  }

  function render() {
    const edges = [...view.edges.values()];
    const { visible, summaries } = summarize(
      rootId,
      [...view.nodes.keys()],
      edges,
      view.openedHubs,
    );
    const elements = [];
    for (const id of visible) {
      const node = view.nodes.get(id);
      const classes = [node.type];
      if (id === rootId) classes.push("root");
      if (memberIds.has(id)) classes.push("member");
      if (node.dropped) classes.push("dropped");
      // The latest data-quality check of this dataset failed (docs/queries.md#lineage).
      if (node.quality === "failed") classes.push("quality-failed");
      elements.push({ group: "nodes", data: nodeData(node), classes: classes.join(" ") });
    }
    for (const edge of edges) {
      if (!visible.has(edge.source) || !visible.has(edge.target)) continue;
      const classes = edge.part
        ? ["part"]
        : edge.hidden
          ? ["hidden"]
          : [`state-${(edge.last_state || "other").toLowerCase()}`];
      if (edge.static) classes.push("static");
      elements.push({
        group: "edges",
        data: { id: `${edge.source}→${edge.target}`, source: edge.source, target: edge.target },
        classes: classes.join(" "),
      });
    }
    for (const s of summaries) {
      const id = `more:${s.key}`;
      elements.push({
        group: "nodes",
        data: { id, label: `+${s.count} more` },
        classes: "summary",
      });
      const [source, target] = s.side === "up" ? [id, s.node] : [s.node, id];
      elements.push({
        group: "edges",
        data: { id: `${id}-edge`, source, target },
        classes: "summary",
      });
    }
    draw(cy, elements);
    renderList(visible, summaries);
    const hiddenCount = summaries.reduce((sum, s) => sum + s.count, 0);
    const shownMembers = members.filter((m) => visible.has(m.id)).length;
    status.textContent =
      `${visible.size} nodes, ${cy.edges().not(".summary, .part").length} edges shown` +
      (members.length
        ? `; ${shownMembers} job${shownMembers === 1 ? "" : "s"} under ${rootNode.name}` +
          (membersTruncated ? " (the first ones)" : "")
        : "") +
      (hiddenCount ? `; ${hiddenCount} summarized` : "") +
      (view.truncated ? `; the server stopped at ${PAGE_LIMIT} nodes per walk` : "");
  }

  function renderList(visible, summaries) {
    const items = readingOrder(cy, visible).map((id) => {
      const node = view.nodes.get(id);
      const open = view.expanded.has(id);
      return h(
        "li",
        {
          class: [
            `graph-node kind-${node.type}`,
            id === rootId ? "root" : null,
            memberIds.has(id) ? "member" : null,
          ]
            .filter(Boolean)
            .join(" "),
          dataset: { nodeId: id },
          onmouseenter: () => cy.getElementById(id).addClass("highlight"),
          onmouseleave: () => cy.getElementById(id).removeClass("highlight"),
        },
        h("span", { class: `kind kind-${node.type}` }, node.type),
        // Focus shows the whole name in the details above, as hovering shows the title.
        h(
          "span",
          { class: "node-name" },
          node.type === "hidden"
            ? h("span", {}, node.name)
            : h(
                "a",
                { href: nodeHref(node), title: fullName(node), onfocus: () => select(id) },
                node.name,
              ),
          h("span", { class: "ns small", title: fullName(node) }, shortNamespace(node.namespace)),
          node.quality === "failed" ? failedBadge() : null,
        ),
        id === rootId || node.type === "hidden"
          ? null
          : h(
              "button",
              {
                type: "button",
                class: "expand",
                "aria-label": `${open ? "Collapse" : "Expand"} ${node.name}`,
                "aria-expanded": String(open),
                onclick: () => toggle(id),
              },
              open ? "−" : "+",
            ),
      );
    });
    for (const s of summaries) {
      const hub = view.nodes.get(s.node);
      items.push(
        h(
          "li",
          { class: "graph-node summary" },
          h(
            "button",
            {
              type: "button",
              onclick: () => select(`more:${s.key}`),
              "aria-label": `Show ${s.count} more ${s.side === "up" ? "upstream" : "downstream"} neighbours of ${hub.name}`,
            },
            `+${s.count} more`,
          ),
          h(
            "span",
            { class: "muted small" },
            ` ${s.side === "up" ? "upstream of" : "downstream of"} ${hub.name}`,
          ),
        ),
      );
    }
    list.replaceChildren(...items);
  }

  load();
  return { element, destroy: () => cy.destroy() };
}

function legend(part) {
  const item = (cls, text) => h("li", {}, h("span", { class: `swatch ${cls}` }), text);
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    item("node-dataset", "dataset"),
    item("node-job", "job"),
    item("node-service", "service"),
    item("node-quality-failed", "latest check failed"),
    item("edge-complete", "last run complete"),
    item("edge-fail", "failed"),
    item("edge-running", "running"),
    item("edge-abort", "aborted"),
    item("edge-static", "declared (JobEvent)"),
    part ? item("edge-part", "part of (parent job → child job)") : null,
  );
}

// A node's box on the canvas: its name over its short namespace, wrapped rather than cut
// short, and sized to fit (about 7 px a character at 12 px); the whole name is the
// canvas's title while the pointer is on it (canvas.js).
export function nodeData(node) {
  const mark = node.quality === "failed" ? "\n✗ check failed" : "";
  const label =
    node.type === "hidden" ? node.name : `${node.name}\n${shortNamespace(node.namespace)}${mark}`;
  const longest = Math.max(...label.split("\n").map((line) => line.length));
  const w = Math.max(130, Math.min(260, longest * 7 + 24));
  const lines = label
    .split("\n")
    .reduce((n, line) => n + Math.max(1, Math.ceil((line.length * 7) / (w - 20))), 0);
  return { id: node.id, label, full: fullName(node), w, h: 14 + 15 * lines };
}

const INSTANT =
  /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?)?\s*(Z|UTC|[+-]\d{2}:?\d{2})?$/i;

// A time as typed (`2026-01-15T02:30`, `2026-01-15 02:30:00Z`, `…+01:00`, a date alone)
// as the RFC 3339 UTC instant the API takes (`2026-01-15T02:30:00Z`); null if it is not
// one. Without a zone it is UTC, never the browser's zone.
export function utcInstant(text) {
  const m = INSTANT.exec(text);
  if (!m) return null;
  const [, day, hh = "00", mm = "00", ss = "00", fraction = "", zone = "Z"] = m;
  const offset = /^(z|utc)$/i.test(zone) ? "Z" : zone.replace(/^([+-]\d{2})(\d{2})$/, "$1:$2");
  const date = new Date(`${day}T${hh}:${mm}:${ss}${fraction}${offset}`);
  if (Number.isNaN(date.getTime())) return null;
  return date.toISOString().replace(/\.000Z$/, "Z");
}
