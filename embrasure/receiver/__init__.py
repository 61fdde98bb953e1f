"""The receiver: the ingest routes, every bound they enforce, and their strict JSON pass
(docs/architecture.md, docs/receiver.md)."""
