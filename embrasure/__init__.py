"""Embrasure: a lineage server for OpenLineage events."""

__version__ = "0.1.0"
