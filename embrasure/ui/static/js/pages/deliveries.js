// Deliveries: recent receipts (newest first) with each one's items and outcomes on
// demand, and the quarantine with each item's reason and a replay button (docs/queries.md#deliveries-and-quarantine).

import { get, post } from "../api.js";
import { append, h } from "../dom.js";
import { count, time } from "../format.js";
import { deliveryHref } from "../links.js";

const STATES = ["", "accepted", "projected", "partially_projected", "quarantined"];

const PAGE = 50;

export async function render(params, page) {
  const state = params.get("state") || "";
  const provider = params.get("provider_key") || "";
  const filters = { state, provider_key: provider };
  const fetchDeliveries = (cursor) =>
    get("/api/v1/deliveries", { ...filters, limit: PAGE, cursor });
  const fetchQuarantine = (cursor) => get("/api/v1/quarantine", { limit: PAGE, cursor });
  const [deliveries, quarantine] = await Promise.all([fetchDeliveries(), fetchQuarantine()]);
  const quarantined = quarantineTable(quarantine.items);
  const received = deliveryTable(deliveries.deliveries);
  // The filters are the page's address, so a filtered view can be shared as a link.
  const refilter = (change) => {
    const query = new URLSearchParams({ ...filters, ...change });
    for (const [key, value] of [...query]) if (!value) query.delete(key);
    location.hash = `#/deliveries${query.size ? `?${query}` : ""}`;
  };
  append(page, [
    h("h1", {}, "Deliveries"),
    h(
      "section",
      { "aria-label": "Quarantine" },
      h("h2", {}, "Quarantine"),
      quarantined,
      older(quarantined, quarantine, fetchQuarantine, (next) => next.items.map(quarantineRow)),
    ),
    h(
      "section",
      { "aria-label": "Recent deliveries" },
      h("h2", {}, "Recent deliveries"),
      h(
        "label",
        { class: "filter" },
        "State ",
        h(
          "select",
          {
            "aria-label": "Delivery state",
            onchange: (event) => refilter({ state: event.target.value }),
          },
          STATES.map((s) => h("option", { value: s, selected: s === state }, s || "any")),
        ),
      ),
      h(
        "label",
        { class: "filter" },
        "Provider ",
        h("input", {
          type: "search",
          value: provider,
          placeholder: "any",
          "aria-label": "Provider key",
          onchange: (event) => refilter({ provider_key: event.target.value.trim() }),
        }),
      ),
      received,
      older(received, deliveries, fetchDeliveries, (next) => next.deliveries.flatMap(deliveryRows)),
    ),
  ]);
}

// A button that appends the next page of a cursor-paginated listing to a table.
function older(table, first, fetchPage, rowsOf) {
  if (!first.next_cursor || table.tagName !== "TABLE") return null;
  let cursor = first.next_cursor;
  const button = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        const next = await fetchPage(cursor);
        table.tBodies[0].append(...rowsOf(next));
        cursor = next.next_cursor;
        button.hidden = !cursor;
      },
    },
    "Older",
  );
  return h("p", {}, button);
}

export function deliveryState(state) {
  return h("span", { class: `state delivery-${state}` }, state.replace("_", " "));
}

function deliveryTable(deliveries) {
  if (!deliveries.length) return h("p", { class: "muted" }, "No deliveries.");
  return h(
    "table",
    { class: "deliveries" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "Received"),
        h("th", {}, "Delivery"),
        h("th", {}, "Provider"),
        h("th", {}, "State"),
        h("th", { class: "num" }, "Items"),
        h("th", { class: "num" }, "Projected"),
        h("th", { class: "num" }, "Quarantined"),
        h("th", { class: "num" }, "Edges"),
      ),
    ),
    h("tbody", {}, deliveries.map(deliveryRows)),
  );
}

function deliveryRows(d) {
  const items = h("tr", { class: "delivery-items", hidden: true }, h("td", { colspan: 8 }));
  const toggle = h(
    "button",
    {
      type: "button",
      class: "link mono small",
      "aria-expanded": "false",
      onclick: async () => {
        const open = toggle.getAttribute("aria-expanded") === "true";
        toggle.setAttribute("aria-expanded", String(!open));
        items.hidden = open;
        if (!open) {
          const full = await get(`/api/v1/deliveries/${encodeURIComponent(d.delivery_id)}`);
          items.firstChild.replaceChildren(itemTable(full.items));
        }
      },
    },
    d.delivery_id,
  );
  return [
    h(
      "tr",
      { class: "delivery" },
      h("td", {}, time(d.received_at)),
      h("td", {}, toggle),
      h("td", {}, d.provider_key),
      h("td", {}, deliveryState(d.state)),
      h("td", { class: "num" }, count(d.summary.received)),
      h("td", { class: "num" }, count(d.summary.projected)),
      h("td", { class: "num" }, count(d.summary.quarantined)),
      h("td", { class: "num" }, count(d.edges_created)),
    ),
    items,
  ];
}

const ITEMS_SHOWN = 12;

// A batch holds up to 1,000 items: the ones that need a look (quarantined, or projected
// with warnings) come first, and a long tail is cut short until asked for.
export function itemTable(all) {
  const weight = (item) => (item.outcome === "quarantined" ? 0 : item.warnings.length ? 1 : 2);
  const items = [...all].sort((a, b) => weight(a) - weight(b) || a.index - b.index);
  const rest = items.slice(ITEMS_SHOWN);
  const plain = rest.every((item) => weight(item) === 2);
  const box = h("div", {}, itemRows(items.slice(0, ITEMS_SHOWN)));
  if (rest.length) {
    const more = h(
      "button",
      { type: "button", class: "link small", onclick: () => box.replaceChildren(itemRows(items)) },
      `Show ${rest.length} more items${plain ? ", all projected without warnings" : ""}`,
    );
    box.append(h("p", {}, more));
  }
  return box;
}

function itemRows(items) {
  return h(
    "table",
    { class: "items" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { class: "num" }, "#"),
        h("th", {}, "Kind"),
        h("th", {}, "Outcome"),
        h("th", {}, "Reason / warnings"),
      ),
    ),
    h(
      "tbody",
      {},
      items.map((item) =>
        h(
          "tr",
          {},
          h("td", { class: "num" }, item.index),
          h("td", {}, item.kind ?? "—"),
          h("td", {}, h("span", { class: `state outcome-${item.outcome}` }, item.outcome)),
          h(
            "td",
            {},
            item.reason ? h("span", { class: "reason" }, item.reason) : null,
            item.warnings.map((w) => h("div", { class: "warning small" }, w)),
          ),
        ),
      ),
    ),
  );
}

function quarantineTable(items) {
  if (!items.length) return h("p", { class: "muted" }, "Nothing quarantined.");
  return h(
    "table",
    { class: "quarantine" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", {}, "Received"),
        h("th", {}, "Delivery / item"),
        h("th", {}, "Kind"),
        h("th", {}, "Reason"),
        h("th", {}, ""),
      ),
    ),
    h("tbody", {}, items.map(quarantineRow)),
  );
}

function quarantineRow(item) {
  const result = h("span", { class: "replay-result", role: "status" });
  const button = h(
    "button",
    {
      type: "button",
      "aria-label": `Replay item ${item.index} of delivery ${item.delivery_id}`,
      onclick: async () => {
        button.disabled = true;
        result.textContent = "Replaying…";
        try {
          const answer = await post(
            `/api/v1/quarantine/${encodeURIComponent(item.delivery_id)}/${item.index}/replay`,
          );
          result.textContent =
            answer.outcome === "projected" ? "Projected" : `Still quarantined: ${answer.reason}`;
        } catch (error) {
          result.textContent = error.message;
        }
        button.disabled = false;
      },
    },
    "Replay",
  );
  return h(
    "tr",
    { class: "quarantined-item" },
    h("td", {}, time(item.received_at)),
    h(
      "td",
      { class: "mono small" },
      h("a", { href: deliveryHref(item.delivery_id), class: "delivery-link" }, item.delivery_id),
      ` #${item.index}`,
    ),
    h("td", {}, item.kind ?? "—"),
    h("td", { class: "reason" }, item.reason),
    h("td", {}, button, " ", result),
  );
}
