"""Other OpenLineage servers, run beside Embrasure on the same machine and the same events
(bench/peers/marquez.py; bench/README.md#embrasure-beside-marquez-benchpeersmarquezpy)."""
