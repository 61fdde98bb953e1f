// Notification subscriptions (docs/notifications.md#subscribing): who hears of failed
// checks, schema changes and failed runs, and where. The form adds one and shows its
// signing secret once; the query (#/subscriptions?target=dataset&namespace=…&name=…,
// linked from a dataset's and a job's page) fills the form in.

import { get, postJson, remove } from "../api.js";
import { append, h } from "../dom.js";
import { datasetHref, jobHref, namespaceHref } from "../links.js";
import { time } from "../format.js";

const KINDS = [
  "check.failed",
  "check.recovered",
  "schema.changed",
  "run.failed",
  "run.aborted",
  "dataset.stale",
];

export async function render(params, page) {
  const listed = await get("/api/v1/subscriptions");
  const list = h("section", { "aria-label": "Subscriptions" }, h("h2", {}, "Subscriptions"));
  const table = subscriptionsTable(listed.subscriptions);
  list.append(table);
  append(page, [h("h1", {}, "Notifications"), form(params, table), list]);
}

function watches(s) {
  if (s.target === "namespace") {
    return h("a", { href: namespaceHref(s.namespace) }, `namespace ${s.namespace}`);
  }
  const href =
    s.target === "dataset" ? datasetHref(s.namespace, s.name) : jobHref(s.namespace, s.name);
  const below = s.depth ? ` and ${s.depth} downstream` : "";
  const stale = s.stale_after ? `, stale after ${s.stale_after / 3600} h` : "";
  return h("span", {}, `${s.target} `, h("a", { href }, `${s.namespace} ${s.name}`), below, stale);
}

function subscriptionsTable(subscriptions) {
  const body = h("tbody", {}, subscriptions.map(row));
  const table = h(
    "table",
    { class: "subscriptions" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Subscription", "Watches", "Events", "Webhook", "Created", ""].map((c) => h("th", {}, c)),
      ),
    ),
    body,
  );
  table.addRow = (s) => body.prepend(row(s));
  return table;
}

function row(s) {
  const status = h("span", { role: "status" });
  const button = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        button.disabled = true;
        try {
          await remove(`/api/v1/subscriptions/${encodeURIComponent(s.subscription_id)}`);
          tr.remove();
        } catch (error) {
          status.textContent = error.message;
          button.disabled = false;
        }
      },
    },
    "Remove",
  );
  const tr = h(
    "tr",
    { class: "subscription" },
    h("td", {}, h("code", {}, s.subscription_id)),
    h("td", {}, watches(s)),
    h("td", {}, s.events.join(", ")),
    h("td", {}, h("code", {}, s.url), s.format === "slack" ? " (Slack)" : ""),
    h("td", {}, time(s.created_at)),
    h("td", {}, button, status),
  );
  return tr;
}

function field(label, input) {
  return h("label", {}, h("span", {}, label), input);
}

function form(params, table) {
  const target = h(
    "select",
    { name: "target" },
    ["dataset", "job", "namespace"].map((t) => h("option", { value: t }, t)),
  );
  target.value = params.get("target") || "dataset";
  const namespace = h("input", {
    name: "namespace",
    required: true,
    value: params.get("namespace") || "",
  });
  const name = h("input", { name: "name", value: params.get("name") || "" });
  const depth = h("input", { name: "depth", type: "number", min: "0", max: "10", value: "0" });
  const staleHours = h("input", {
    name: "stale",
    type: "number",
    min: "0",
    step: "any",
    value: "0",
  });
  const url = h("input", { name: "url", type: "url", required: true, placeholder: "https://…" });
  const format = h(
    "select",
    { name: "format" },
    h("option", { value: "standard" }, "JSON, signed (Standard Webhooks)"),
    h("option", { value: "slack" }, "Slack incoming webhook"),
  );
  const kinds = KINDS.map((kind) =>
    h("input", { type: "checkbox", name: "events", value: kind, checked: true }),
  );
  const events = h(
    "fieldset",
    {},
    h("legend", {}, "Events"),
    kinds.map((box) => h("label", { class: "inline" }, box, box.value)),
  );
  const result = h("div", { role: "status", class: "subscribed" });
  const named = () => {
    name.disabled = target.value === "namespace";
    depth.disabled = target.value !== "dataset";
    staleHours.disabled = target.value !== "dataset";
  };
  target.addEventListener("change", named);
  named();
  const submit = h("button", { type: "submit" }, "Subscribe");
  const el = h(
    "form",
    {
      "aria-label": "New subscription",
      class: "subscribe",
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        result.replaceChildren();
        const wanted = {
          target: target.value,
          namespace: namespace.value,
          url: url.value,
          format: format.value,
          events: kinds.filter((box) => box.checked).map((box) => box.value),
        };
        if (target.value !== "namespace") wanted.name = name.value;
        if (target.value === "dataset") {
          wanted.depth = Number(depth.value || 0);
          const seconds = Math.round(Number(staleHours.value || 0) * 3600);
          if (seconds > 0) wanted.stale_after = seconds;
        }
        try {
          const added = await postJson("/api/v1/subscriptions", wanted);
          table.addRow(added);
          result.replaceChildren(
            h(
              "p",
              {},
              `Subscribed: ${added.subscription_id}. Its signing secret, shown this once:`,
            ),
            h("code", { class: "secret" }, added.secret),
          );
        } catch (error) {
          result.replaceChildren(h("p", { class: "error" }, error.message));
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("h2", {}, "New subscription"),
    field("Watch", target),
    field("Namespace", namespace),
    field("Name", name),
    field("Datasets downstream", depth),
    field("Stale after (hours, 0: never)", staleHours),
    events,
    field("Webhook URL", url),
    field("Format", format),
    submit,
    result,
  );
  return el;
}
