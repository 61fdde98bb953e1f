// Facets as people read them: the documented OpenLineage facets get their own layout
// (documentation, ownership, dataSource, sql, sourceCode, jobType); every other facet is
// shown as its JSON, so nothing a producer sent is hidden.

import { h } from "./dom.js";

// The facet envelope's keys (BaseFacet in the OpenLineage spec), not the facet's content.
const ENVELOPE = new Set(["_producer", "_schemaURL", "_deleted"]);

const SPECIAL = {
  documentation: (f) => h("p", { class: "doc" }, f.description ?? ""),
  ownership: (f) =>
    h(
      "ul",
      { class: "owners" },
      (f.owners || []).map((o) =>
        h("li", {}, o.name, o.type ? h("span", { class: "muted" }, ` (${o.type})`) : null),
      ),
    ),
  dataSource: (f) => h("p", {}, f.name ?? "", " ", h("span", { class: "mono" }, f.uri ?? "")),
  sql: (f) => code(f.query, f.dialect || "sql"),
  sourceCode: (f) => code(f.sourceCode, f.language || "source"),
  jobType: (f) =>
    h("p", {}, [f.processingType, f.integration, f.jobType].filter(Boolean).join(" · ")),
};

function code(text, language) {
  return h("pre", { class: "code", "data-language": language }, h("code", {}, text ?? ""));
}

function content(facet) {
  return Object.fromEntries(Object.entries(facet).filter(([key]) => !ENVELOPE.has(key)));
}

// `elsewhere` names the facets the page shows in a section of its own (the schema as its
// fields), each with where: they are not repeated here, but said to be there, so that
// "No facets." never stands beside a schema.
export function facetList(facets, { elsewhere = {} } = {}) {
  // The ones a person looks for first (what is it, whose is it, where is it), then the
  // rest by name.
  const rank = (name) => (name in SPECIAL ? Object.keys(SPECIAL).indexOf(name) : 99);
  const all = Object.keys(facets || {});
  const moved = all.filter((name) => name in elsewhere).sort();
  const names = all
    .filter((name) => !(name in elsewhere))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const note = moved.length
    ? h(
        "p",
        { class: "facets-elsewhere muted small" },
        moved.map((name) => `${name}: ${elsewhere[name]}`).join("; "),
      )
    : null;
  if (!names.length) {
    const none = moved.length ? "No other facets." : "No facets.";
    return h("div", {}, h("p", { class: "muted" }, none), note);
  }
  const list = h(
    "div",
    { class: "facets" },
    names.map((name) => {
      const facet = facets[name];
      const special = SPECIAL[name] && typeof facet === "object" ? SPECIAL[name] : null;
      return h(
        "section",
        { class: "facet", "aria-label": `${name} facet` },
        h("h3", {}, name),
        special
          ? special(facet)
          : h("pre", { class: "json" }, JSON.stringify(content(facet), null, 2)),
      );
    }),
  );
  return h("div", {}, list, note);
}
