"""Marquez's HTTP API (0.50), served from Embrasure's graph (docs/marquez.md).

A Marquez user changes a host name: marquez-web, marquez-python and scripts calling
``/api/v1/lineage?nodeId=`` talk to ``serve --marquez-port`` and get Marquez's paths,
parameters, status codes and JSON shapes. Nothing here is stored apart: every answer is
derived from the graph the rest of Embrasure serves (model.py says how Marquez's notions
map onto it), one module per resource:

- ``http.py`` — the app on the Marquez port: routes matched on the raw path (names hold
  ``/``, percent-encoded by Marquez's clients), Marquez's error body, the port dispatch;
- ``model.py`` — the mapping decided once: run states, versions, times, node ids;
- ``namespaces.py``, ``datasets.py``, ``jobs.py``, ``runs.py`` — the entities;
- ``lineage.py``, ``column_lineage.py``, ``events.py``, ``search.py``, ``stats.py``;
- ``tags.py``, ``sources.py``.
"""
