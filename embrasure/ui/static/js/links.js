// Where each kind of node lives in the UI. Pages are hash routes whose query names the
// entity (namespaces hold ':' and '/', so they are never path segments; docs/queries.md#conventions).

import { url } from "./api.js";

export function datasetHref(namespace, name) {
  return "#" + url("/dataset", { namespace, name });
}

export function jobHref(namespace, name) {
  return "#" + url("/job", { namespace, name });
}

export function columnHref(namespace, name, field, options = {}) {
  return "#" + url("/column", { namespace, name, field, ...options });
}

export function namespaceHref(name) {
  return "#" + url("/namespace", { name });
}

export function runHref(runId) {
  return "#" + url("/run", { id: runId });
}

// The notifications page with its form filled in for this dataset or job.
export function subscribeHref(target, namespace, name) {
  return "#" + url("/subscriptions", { target, namespace, name });
}

export function deliveryHref(id) {
  return "#" + url("/delivery", { id });
}

export function nodeHref(node) {
  if (node.type === "field") return columnHref(node.namespace, node.name, node.field);
  if (node.type === "dataset") return datasetHref(node.namespace, node.name);
  return jobHref(node.namespace, node.name);
}
