// Impact downstream (GET /api/v1/impact): "what breaks, and does PII flow there, if I
// change this?" — each item with its distance and one shortest path; an item whose path
// crosses a masked mapping is marked, and so is a dataset whose latest check failed. Shown on the column view and the dataset page.

import { h } from "./dom.js";
import { entityLink, fullName, parseNodeId } from "./names.js";
import { failedBadge } from "./quality.js";

export function impactTable(impact) {
  if (!impact.items.length) return h("p", { class: "muted" }, "Nothing downstream.");
  const note = impact.truncated
    ? h(
        "p",
        { class: "muted small" },
        `The first ${impact.items.length} items; the server stopped there.`,
      )
    : null;
  const table = h(
    "table",
    { class: "impact" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "What"),
        h("th", {}, "Kind"),
        h("th", { class: "num" }, "Distance"),
        h("th", {}, "Path"),
      ),
    ),
    h(
      "tbody",
      {},
      impact.items.map((item) => {
        const node = item.node;
        const title = node.type === "field" ? `${node.name}.${node.field}` : node.name;
        return h(
          "tr",
          { class: item.masked ? "masked" : null },
          h(
            "td",
            {},
            entityLink(node, { text: title }),
            item.masked
              ? h(
                  "span",
                  {
                    class: "badge masked",
                    title:
                      "Masked path: a masking mapping (columnLineage masking flag) lies on this " +
                      "path, so this item gets a hashed or masked value, not the raw one.",
                  },
                  "masked path",
                )
              : null,
            // Downstream of a failed check: the dataset's latest check failed.
            node.quality === "failed" ? failedBadge() : null,
          ),
          h("td", {}, h("span", { class: `kind kind-${node.type}` }, node.type)),
          h("td", { class: "num" }, item.distance),
          h(
            "td",
            {
              class: "path small",
              title: item.path.map((id) => fullName(parseNodeId(id))).join(" → "),
            },
            item.path.map(shortId).join(" → "),
          ),
        );
      }),
    ),
  );
  return h("div", {}, note, table);
}

// The last part of a node id (docs/queries.md#conventions: ids split from the right; ':' is encoded).
function shortId(id) {
  const parts = id.split(":");
  return decodeURIComponent(
    parts[0] === "field" ? `${parts.at(-2)}.${parts.at(-1)}` : parts.at(-1),
  );
}
