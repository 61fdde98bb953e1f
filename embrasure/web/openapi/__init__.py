"""The OpenAPI 3.1 document at /openapi.json and the /docs page that renders it."""
