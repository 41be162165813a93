"""A catalog call in a thread, overlapping Spark work (the swap creates and drops its temporary
table's metadata while Spark writes or refreshes)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from tableswap.core.catalog_port import Catalog


class Background:
    """One catalog operation on ``catalog`` in a thread, so that it overlaps Spark work. Nothing
    else may use ``catalog`` until :meth:`join` (a Thrift client is not thread-safe), which waits,
    re-raises the operation's error or returns its result."""

    def __init__(self, name: str, fn: Callable[[Catalog], Any], catalog: Catalog) -> None:
        self._error: BaseException | None = None
        self._result: Any = None

        def run() -> None:
            try:
                self._result = fn(catalog)
            except BaseException as exc:  # noqa: BLE001 - handed to join()
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"tableswap-{name}", daemon=True)
        self._thread.start()

    def join(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result
