// A namespace: its datasets and its jobs and services, a page at a time, so the graph
// can be browsed without knowing a name to search for.

import { get } from "../api.js";
import { append, h } from "../dom.js";
import { datasetHref, jobHref } from "../links.js";
import { stateBadge } from "../runs.js";

const PAGE = 100;

export async function render(params, page) {
  const namespace = params.get("name");
  const [datasets, jobs] = await Promise.all([
    get("/api/v1/datasets", { namespace, limit: PAGE }),
    get("/api/v1/jobs", { namespace, limit: PAGE }),
  ]);
  append(page, [
    h("p", { class: "crumb" }, "namespace"),
    h("h1", {}, namespace),
    h(
      "div",
      { class: "columns" },
      h(
        "section",
        { "aria-label": "Datasets" },
        h("h2", {}, "Datasets"),
        listing(datasets, "datasets", namespace, datasetItem),
      ),
      h(
        "section",
        { "aria-label": "Jobs" },
        h("h2", {}, "Jobs and services"),
        listing(jobs, "jobs", namespace, jobItem),
      ),
    ),
  ]);
}

// One page of a cursor-paginated listing, and a button that appends the next.
function listing(first, key, namespace, item) {
  if (!first[key].length) return h("p", { class: "muted" }, "None.");
  const list = h("ul", { class: "entity-list" }, first[key].map(item));
  const box = h("div", {}, list);
  let cursor = first.next_cursor;
  const more = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        const next = await get(`/api/v1/${key}`, { namespace, limit: PAGE, cursor });
        list.append(...next[key].map(item));
        cursor = next.next_cursor;
        more.hidden = !cursor;
      },
    },
    "More",
  );
  more.hidden = !cursor;
  box.append(more);
  return box;
}

function datasetItem(d) {
  return h(
    "li",
    {},
    h("a", { href: datasetHref(d.namespace, d.name) }, d.name),
    d.aliases.length
      ? h("span", { class: "muted small" }, ` also ${d.aliases.map((a) => a.name).join(", ")}`)
      : null,
    d.dropped ? h("span", { class: "badge dropped" }, "dropped") : null,
  );
}

function jobItem(j) {
  return h(
    "li",
    {},
    h("span", { class: `kind kind-${j.type}` }, j.type),
    " ",
    h("a", { href: jobHref(j.namespace, j.name) }, j.name),
    j.latest_run ? [" ", stateBadge(j.latest_run.state)] : null,
  );
}
