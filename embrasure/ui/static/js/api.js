// The JSON read API (docs/queries.md). Errors are RFC 9457 problem documents: their
// `detail` is written for people, so pages show it as it comes.

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export function url(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

// The bearer token (docs/security.md), once the server asked for one: kept for this tab
// only (sessionStorage), sent with every API call.
const TOKEN_KEY = "embrasure.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) =>
    value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY),
};

// A person signed in with the company's identity provider (docs/security.md
// #signing-in-to-the-web-ui) has a session cookie instead, sent by the browser; their
// writes carry the session's CSRF token, which GET /auth/session gives.
let session = null;

export async function signedIn() {
  if (session === null) {
    const response = await fetch("/auth/session", { headers: { Accept: "application/json" } });
    const body = response.ok ? await response.json() : {};
    session = body.signed_in ? body : false;
  }
  return session || null;
}

export async function signOut() {
  const current = await signedIn();
  if (current) {
    await fetch("/auth/logout", {
      method: "POST",
      headers: { [current.csrf_header]: current.csrf_token },
    });
  }
  session = null;
  token.set(null);
}

async function request(method, path, params, json) {
  const bearer = token.get();
  const csrf = !bearer && method !== "GET" ? await signedIn() : null;
  const response = await fetch(url(path, params), {
    method,
    headers: {
      Accept: "application/json",
      ...(json !== undefined ? { "Content-Type": "application/json" } : {}),
      ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}),
      ...(csrf ? { [csrf.csrf_header]: csrf.csrf_token } : {}),
    },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export const get = (path, params) => request("GET", path, params);
export const post = (path, params) => request("POST", path, params);
export const postJson = (path, json) => request("POST", path, {}, json);
export const remove = (path) => request("DELETE", path);
