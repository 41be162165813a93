"""Prometheus metrics: :mod:`.prometheus` is the one importer of ``prometheus-client`` (the swaps' hook,
:class:`tableswap.hooks.PrometheusHook`, and the janitor's metrics go through it); :mod:`.janitor` publishes
the janitor's run and the journal's backlog. Nothing is imported here, so that the hook's low layer can use
:mod:`.prometheus` without the janitor's operations."""
