// Home: what came in (deliveries and items), what the projector still has to do (the
// backlog), the latest runs, and the namespaces to start from.

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { count } from "../format.js";
import { namespaceHref } from "../links.js";
import { runTable } from "../runs.js";

export async function render(params, page) {
  const [overview, namespaces] = await Promise.all([
    get("/api/v1/overview", { runs: 12 }),
    get("/api/v1/namespaces", { limit: 100 }),
  ]);
  const d = overview.deliveries;
  const items = overview.items;
  append(page, [
    h("h1", {}, "Lineage overview"),
    h(
      "section",
      { class: "cards", "aria-label": "Ingest counters" },
      card("Deliveries", count(Object.values(d).reduce((a, b) => a + b, 0)), [
        ["projected", d.projected],
        ["partially projected", d.partially_projected],
        ["quarantined", d.quarantined],
      ]),
      card("Events", count(items.received), [
        ["projected", items.projected],
        ["quarantined", items.quarantined],
      ]),
      card(
        "Backlog",
        count(overview.backlog.items),
        [["deliveries waiting", overview.backlog.deliveries]],
        overview.backlog.items ? "busy" : "idle",
      ),
    ),
    h(
      "section",
      { "aria-label": "Recent runs" },
      h("h2", {}, "Recent runs"),
      runTable(overview.recent_runs, { showJob: true }),
    ),
    h(
      "section",
      { "aria-label": "Namespaces" },
      h("h2", {}, "Namespaces"),
      namespaceTable(namespaces.namespaces),
    ),
  ]);
}

function card(title, value, parts, tone = "") {
  return h(
    "div",
    { class: `card ${tone}` },
    h("h2", {}, title),
    h("p", { class: "big" }, value),
    h(
      "ul",
      {},
      parts.map(([label, n]) => h("li", {}, h("span", { class: "num" }, count(n)), ` ${label}`)),
    ),
  );
}

function namespaceTable(namespaces) {
  if (!namespaces.length) {
    return h(
      "p",
      { class: "muted" },
      "Nothing yet: POST OpenLineage events to ",
      h("code", {}, "/api/v1/lineage"),
      ", or run ",
      h("code", {}, "embrasure demo"),
      ".",
    );
  }
  return h(
    "table",
    { class: "namespaces" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "Namespace"),
        h("th", { class: "num" }, "Datasets"),
        h("th", { class: "num" }, "Jobs"),
      ),
    ),
    h(
      "tbody",
      {},
      namespaces.map((ns) =>
        h(
          "tr",
          {},
          h("td", { class: "mono" }, h("a", { href: namespaceHref(ns.name) }, ns.name)),
          h("td", { class: "num" }, count(ns.datasets)),
          h("td", { class: "num" }, count(ns.jobs)),
        ),
      ),
    ),
  );
}
