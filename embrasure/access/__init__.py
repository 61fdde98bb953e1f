"""Who may do what: static tokens, JWTs from the identity provider, and grant rules
(docs/security.md)."""
