// One delivery (GET /api/v1/deliveries/{id}, docs/queries.md#deliveries-and-quarantine):
// who sent it and when, its state and counts, and every item's outcome — the page a
// quarantined item links to.

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { count, time } from "../format.js";
import { deliveryState, itemTable } from "./deliveries.js";

export async function render(params, page) {
  const id = params.get("id");
  const d = await get(`/api/v1/deliveries/${encodeURIComponent(id)}`);
  const fact = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
  append(page, [
    h("p", { class: "crumb" }, h("a", { href: "#/deliveries" }, "Deliveries")),
    h("h1", {}, "Delivery ", h("span", { class: "mono" }, d.delivery_id)),
    h(
      "dl",
      { class: "identities", "aria-label": "Delivery" },
      fact("State", deliveryState(d.state)),
      fact("Received", time(d.received_at)),
      fact("Provider", d.provider_key ?? "—"),
      fact(
        "Items",
        `${count(d.summary.received)} received, ${count(d.summary.projected)} projected, ` +
          `${count(d.summary.quarantined)} quarantined, ${count(d.summary.pending)} pending`,
      ),
      fact("Edges created", count(d.edges_created)),
    ),
    h("section", { "aria-label": "Items" }, h("h2", {}, "Items"), itemTable(d.items)),
  ]);
}
