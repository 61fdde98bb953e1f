"""The processes ``serve`` runs, supervised (docs/operations.md#processes)."""
