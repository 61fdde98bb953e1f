// The search box: datasets, jobs, services, fields and aliases (GET /api/v1/search).
// Keyboard: "/" focuses it, ↑/↓ move through the results, Enter opens, Escape closes.
// It follows the WAI-ARIA combobox pattern, so the active result is announced.

import { get } from "./api.js";
import { h } from "./dom.js";
import { nodeHref } from "./links.js";

const DELAY_MS = 120; // one request per pause in typing, not per key

export function mountSearch(root) {
  const input = h("input", {
    type: "search",
    placeholder: "Search datasets, jobs, fields…  ( / )",
    "aria-label": "Search datasets, jobs and fields",
    role: "combobox",
    "aria-expanded": "false",
    "aria-controls": "search-results",
    "aria-autocomplete": "list",
    autocomplete: "off",
  });
  const list = h("ul", { id: "search-results", role: "listbox", class: "results", hidden: true });
  root.append(input, list);

  let results = [];
  let active = -1;
  let timer = null;
  let asked = 0;

  function close() {
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  }

  function show(found) {
    results = found;
    active = found.length ? 0 : -1;
    list.replaceChildren(
      ...(found.length
        ? found.map((r, i) => option(r, i))
        : [h("li", { class: "empty" }, "No match")]),
    );
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    highlight();
  }

  function option(result, index) {
    const node = result.node;
    const title = node.type === "field" ? `${node.name}.${node.field}` : node.name;
    return h(
      "li",
      {
        id: `search-result-${index}`,
        role: "option",
        class: "result",
        onmousedown: (event) => {
          event.preventDefault(); // keep focus until the click opens it
          open(index);
        },
      },
      h("span", { class: `kind kind-${node.type}` }, node.type),
      h("span", { class: "title" }, title),
      h("span", { class: "ns" }, node.namespace),
      result.alias ? h("span", { class: "alias" }, `alias ${result.alias.name}`) : null,
    );
  }

  function highlight() {
    [...list.children].forEach((li, i) => li.setAttribute("aria-selected", i === active));
    if (active >= 0) {
      input.setAttribute("aria-activedescendant", `search-result-${active}`);
      list.children[active].scrollIntoView({ block: "nearest" });
    }
  }

  function open(index) {
    const result = results[index];
    if (!result) return;
    close();
    input.blur();
    location.hash = nodeHref(result.node);
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    const q = input.value.trim();
    if (!q) return close();
    timer = setTimeout(async () => {
      const mine = ++asked;
      const found = await get("/api/v1/search", { q, limit: 12 }).catch(() => null);
      if (mine === asked && found) show(found.results);
    }, DELAY_MS);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (list.hidden || !results.length) return;
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      active = (active + step + results.length) % results.length;
      highlight();
    } else if (event.key === "Enter") {
      event.preventDefault();
      open(active);
    } else if (event.key === "Escape") {
      close();
    }
  });
  input.addEventListener("blur", () => setTimeout(close, 100));

  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName);
    if (event.key === "/" && !typing) {
      event.preventDefault();
      input.focus();
      input.select();
    }
  });
}
