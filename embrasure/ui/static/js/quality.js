// What a run did to one dataset it read or wrote (docs/ui.md#what-each-run-did): the
// statistics, data-quality assertions and schema it sent, read from an input or output
// of GET /api/v1/runs/{runId} (`facets`, `inputFacets` / `outputFacets`) or an entry of
// GET /api/v1/datasets/runs (which adds `statistics` and `assertions` worked out by the
// server). Shared by the run and dataset pages.

import { h } from "./dom.js";
import { bytes, count } from "./format.js";

// The role's own facet names (OpenLineage 2-0-2: InputDataset.inputFacets,
// OutputDataset.outputFacets).
export const ROLE_FACETS = { input: "inputFacets", output: "outputFacets" };

// rowCount, size and fileCount, by the server's rule (docs/queries.md, datasets/runs'
// `statistics`): OutputStatisticsOutputDatasetFacet 1-0-2 for a write; for a read,
// InputStatisticsInputDatasetFacet 1-0-0, else a DataQualityMetrics facet 1-0-3 (Spark
// sends it for inputs; its `bytes` is the size), the input facet before the dataset's.
export function statisticsOf(entry, role) {
  if (entry.statistics) return entry.statistics;
  const own = entry[ROLE_FACETS[role]] || {};
  const candidates =
    role === "output"
      ? [[own.outputStatistics, "size"]]
      : [
          [own.inputStatistics, "size"],
          [own.dataQualityMetrics, "bytes"],
          [entry.facets?.dataQualityMetrics, "bytes"],
        ];
  for (const [facet, sizeKey] of candidates) {
    if (!facet || typeof facet !== "object" || facet._deleted === true) continue;
    const pick = (key) => (Number.isInteger(facet[key]) ? facet[key] : undefined);
    const found = { rowCount: pick("rowCount"), size: pick(sizeKey), fileCount: pick("fileCount") };
    if (Object.values(found).some((v) => v !== undefined)) return found;
  }
  return {};
}

export function statisticsText(stats) {
  const parts = [];
  if (stats.rowCount !== undefined && stats.rowCount !== null)
    parts.push(`${count(stats.rowCount)} row${stats.rowCount === 1 ? "" : "s"}`);
  if (stats.size !== undefined && stats.size !== null) parts.push(bytes(stats.size));
  if (stats.fileCount !== undefined && stats.fileCount !== null)
    parts.push(`${count(stats.fileCount)} file${stats.fileCount === 1 ? "" : "s"}`);
  return parts.join(" · ");
}

// DataQualityAssertionsDatasetFacet 1-1-0 `assertions: [{assertion, success, column?}]`.
// OpenLineage sends it as an input facet of the checking run; older producers (dbt's
// structured-log integration) put it among the dataset facets: both are read.
export function assertionsOf(entry) {
  const facet =
    entry.inputFacets?.dataQualityAssertions ||
    entry.outputFacets?.dataQualityAssertions ||
    entry.facets?.dataQualityAssertions;
  const list = Array.isArray(facet?.assertions) ? facet.assertions : [];
  return list.filter((a) => a && typeof a === "object");
}

// The assertion and its column, as people name a check: "not_null on amount".
export function assertionName(a) {
  return a.column ? `${a.assertion} on ${a.column}` : String(a.assertion ?? "assertion");
}

export const FAILED_TITLE =
  "The latest data-quality check of this dataset failed: a dataQualityAssertions facet " +
  "with at least one assertion whose success is false.";

// The mark of a dataset whose latest check failed (lineage node list, impact, headings).
export function failedBadge(text = "check failed") {
  return h("span", { class: "badge quality-failed", title: FAILED_TITLE }, text);
}

// A run's assertions on one dataset as a table, the failed ones first and marked.
export function assertionTable(assertions) {
  const failed = (a) => a.success === false;
  const sorted = [...assertions].sort((a, b) => Number(failed(b)) - Number(failed(a)));
  return h(
    "table",
    { class: "assertions" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "Assertion"), h("th", {}, "Column"), h("th", {}, "Result")),
    ),
    h(
      "tbody",
      {},
      sorted.map((a) =>
        h(
          "tr",
          { class: failed(a) ? "failed" : "passed" },
          h("td", { class: "mono" }, String(a.assertion ?? "")),
          h("td", { class: "mono" }, a.column ?? "—"),
          h("td", {}, failed(a) ? failedBadge("failed") : a.success ? "passed" : "—"),
        ),
      ),
    ),
  );
}

// A datasets/runs entry's `assertions: {passed, failed, failures}` in one cell.
export function checksCell(summary) {
  if (!summary || summary.passed + summary.failed === 0) return h("span", { class: "muted" }, "—");
  const failures = summary.failures || [];
  return h(
    "span",
    { class: summary.failed ? "checks failed" : "checks" },
    `${summary.passed} passed`,
    summary.failed ? [", ", failedBadge(`${summary.failed} failed`)] : null,
    failures.length
      ? h(
          "ul",
          { class: "failures" },
          failures.map((f) => h("li", {}, assertionName(f))),
        )
      : null,
  );
}

// A schema field as a run saw it (SchemaDatasetFacet 1-2-0): "amount decimal(10,2)".
export function fieldText(field) {
  if (typeof field === "string") return field;
  if (!field || typeof field !== "object") return String(field);
  return field.type ? `${field.name} ${field.type}` : String(field.name ?? "");
}
