"""HTTP plumbing: the read and admin routes, auth, query parameters, error rendering,
metrics and the OpenAPI document (docs/architecture.md)."""
