"""OpenLineage: the events of tableswap's operations (:mod:`.events`, the only importer of the
``openlineage-python`` client) and the schema of tableswap's own facets (``facets.json``)."""
