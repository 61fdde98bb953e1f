// How a node is named on a page. A bare name is ambiguous (`orders` is in s3://demo-raw
// and in postgres://shop-db:5432), and a whole namespace is too long for a graph box or
// a table cell: pages show the name with a short form of its namespace, and the whole
// `namespace/name` as the link's title (on hover) and in a tip on keyboard focus
// (style.css, a.entity[data-full]).

import { h } from "./dom.js";
import { nodeHref } from "./links.js";

// The part of a namespace that tells namespaces apart: the last path segment of a URI
// (`postgres://db:5432/shop` → `shop`), else its host without the port
// (`s3://demo-raw` → `demo-raw`, `hive://metastore.demo:9083` → `metastore.demo`); a
// namespace that is not a URI (`demo-airflow`) as it is.
export function shortNamespace(namespace) {
  const uri = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)([^?#]*)/i.exec(namespace || "");
  if (!uri) return namespace;
  const segment = uri[2].split("/").filter(Boolean).at(-1);
  if (segment) return segment;
  const host = uri[1].replace(/^[^@]*@/, "").replace(/:\d+$/, "");
  return host || namespace;
}

// The node's whole identity, as one string: `namespace/name` (and `.field`).
export function fullName(node) {
  const base = `${node.namespace}/${node.name}`;
  return node.type === "field" ? `${base}.${node.field}` : base;
}

// A node id split into its parts (docs/queries.md#conventions: `job:{namespace}:{name}`,
// the name part percent-encoded, so it splits from the right).
export function parseNodeId(id) {
  const type = id.slice(0, id.indexOf(":"));
  const rest = id.slice(type.length + 1);
  if (type === "field") {
    const fieldAt = rest.lastIndexOf(":");
    const nameAt = rest.lastIndexOf(":", fieldAt - 1);
    return {
      type,
      namespace: rest.slice(0, nameAt),
      name: decodeURIComponent(rest.slice(nameAt + 1, fieldAt)),
      field: decodeURIComponent(rest.slice(fieldAt + 1)),
    };
  }
  const at = rest.lastIndexOf(":");
  return { type, namespace: rest.slice(0, at), name: decodeURIComponent(rest.slice(at + 1)) };
}

// A link to a node's page, its text `text` (the name unless told), followed by the short
// namespace; both carry the whole name.
export function entityLink(node, { text = node.name, attrs = {} } = {}) {
  const full = fullName(node);
  return [
    h(
      "a",
      { href: nodeHref(node), class: "entity", title: full, "data-full": full, ...attrs },
      text,
    ),
    " ",
    h("span", { class: "ns small", title: full }, shortNamespace(node.namespace)),
  ];
}
