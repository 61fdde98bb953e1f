"""The storage lifecycle (docs/operations.md#retention-and-the-archive): the archive that
trimmed delivery bodies move to (archive.py, its segment format in segments.py and its
checks in verify.py) and the retention pass that moves them (retention.py)."""
