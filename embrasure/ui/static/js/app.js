// The router: each page is a hash route (#/dataset?namespace=…&name=…) drawn into <main>
// by one module under pages/. A page's render() gets the query parameters and the
// <main> element, and may return a cleanup function (the graph frees its canvas).

import { ApiError, signOut, signedIn, token } from "./api.js";
import { h } from "./dom.js";
import { mountSearch } from "./search.js";
import * as columns from "./pages/columns.js";
import * as dataset from "./pages/dataset.js";
import * as delivery from "./pages/delivery.js";
import * as deliveries from "./pages/deliveries.js";
import * as home from "./pages/home.js";
import * as job from "./pages/job.js";
import * as namespace from "./pages/namespace.js";
import * as run from "./pages/run.js";
import * as subscriptions from "./pages/subscriptions.js";

const PAGES = {
  "/": home,
  "/dataset": dataset,
  "/job": job,
  "/column": columns,
  "/deliveries": deliveries,
  "/delivery": delivery,
  "/namespace": namespace,
  "/run": run,
  "/subscriptions": subscriptions,
};

const main = document.getElementById("page");
let cleanup = null;
let drawn = 0; // a newer navigation wins over a slower, older one

async function route() {
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const page = PAGES[path];
  const params = new URLSearchParams(query || "");
  const mine = ++drawn;
  if (cleanup) cleanup();
  cleanup = null;
  if (!page) {
    main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, `No page ${path}.`));
    return;
  }
  // The page is in the document while it renders: the graph canvas measures itself.
  const loading = h("p", { class: "muted" }, "Loading…");
  const content = h("div", { class: "page" });
  main.replaceChildren(loading, content);
  try {
    const result = await page.render(params, content);
    if (mine !== drawn) {
      if (typeof result === "function") result();
      return;
    }
    cleanup = typeof result === "function" ? result : null;
    loading.remove();
    document.title = `${content.querySelector("h1")?.textContent || "Embrasure"} · Embrasure`;
    // Move focus to the new page, so a screen reader starts there — unless the user is
    // already typing somewhere (the search box) while the page loaded.
    if (!document.activeElement || document.activeElement === document.body) {
      main.focus({ preventScroll: true });
    }
  } catch (error) {
    if (mine !== drawn) return;
    if (error instanceof ApiError && error.status === 401) {
      main.replaceChildren(signIn(error.message, error.problem.sign_in));
      return;
    }
    console.error(error);
    const status = error instanceof ApiError ? `${error.status} ` : "";
    main.replaceChildren(
      h("h1", {}, "Could not load this page"),
      h("p", { class: "error", role: "alert" }, `${status}${error.message}`),
    );
  }
}

// Auth is on (a 401): send the person to the identity provider when the server has one
// (the problem's sign_in member), or ask for a token, kept for this tab; then draw the
// page again.
function signIn(reason, provider) {
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true });
  const then = `/${location.hash || "#/"}`;
  return h(
    "form",
    {
      class: "sign-in",
      onsubmit: (event) => {
        event.preventDefault();
        token.set(input.value.trim());
        route();
      },
    },
    h("h1", {}, "Sign in"),
    h("p", { role: "alert" }, reason),
    provider
      ? h(
          "p",
          {},
          h(
            "a",
            {
              class: "button",
              id: "sign-in",
              href: `${provider}?then=${encodeURIComponent(then)}`,
            },
            "Sign in with your company account",
          ),
        )
      : null,
    h(
      "label",
      { for: "token" },
      "Bearer token with scope read (from ",
      h("code", {}, "embrasure tokens create --scope read"),
      ")",
    ),
    input,
    h("button", { type: "submit" }, "Use this token"),
  );
}

// Signed in with the identity provider: who, and a way out.
async function showAccount() {
  const current = await signedIn();
  if (!current) return;
  const out = h(
    "button",
    {
      type: "button",
      class: "sign-out",
      onclick: async () => {
        await signOut();
        location.reload();
      },
    },
    "Sign out",
  );
  document
    .querySelector("header.top nav")
    .append(h("span", { class: "account", id: "account" }, current.name), out);
}

mountSearch(document.getElementById("search"));
showAccount();
window.addEventListener("hashchange", route);
route();
