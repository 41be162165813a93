"""What a swap is asked to do, as one value: :class:`SwapRequest`.

The public functions (``swap_partitions``, ``swap_table``, ``stage_*``) and the swaps of their own kind (a merge,
a compaction, a SQL script's overwrite, a swap group's member) each build one and hand it, with the batch and the
runtime, to ``ops/write/swap.py`` (``run_swap`` / ``run_stage``). The batch (a DataFrame) and the runtime are no
part of it: they are what the request is carried out with.

It lives here rather than in ``core/``: its ``input_conflicts`` is the commit protocol's own callable
(``ops/operation.py``, a listing of storage under the lock), and only the write front ends use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tableswap import errors
from tableswap.core.records import SwapKind
from tableswap.ops.operation import InputConflicts

#: A check of ``audit=``: given the staged batch (a DataFrame), it raises or returns ``False`` to refuse it.
Check = Callable[[Any], Any]


@dataclass(frozen=True)
class SwapRequest:
    """One swap's options.

    Attributes:
        table: ``db.table``, or a table of the Spark session's current database.
        partitioned: a swap of partitions (``swap_partitions``), else of an unpartitioned table's location.
        replace_where: the partitions the swap owns (a predicate or partition specs; ``swap_partitions``).
        allow_empty: an empty batch empties the scope (or the unpartitioned table) on purpose.
        if_unchanged_since: a state token the swap is refused under when what it covers changed.
        dry_run: stage and plan from an unlocked read, change nothing.
        checks: the audit's checks (:func:`checks_of`), run on the staged batch before the lock.
        keep_on_failure: a batch the audit refuses is kept as a staged swap (else discarded).
        kind: what the journal records (a merge, a compaction); None: a swap of partitions or of a table.
        verify: sees the staged batch before the lock and may refuse it (a compaction's row check).
        write_distribution: how the staging write lays out the batch; None: the settings' ``[swap]``.
        input_conflicts: what the swap read that the catalog does not show, compared again under the lock.
        stored_values: each partition Spark wrote, named as the metastore stores the one it replaces.
        empty_partitions: partitions kept, emptied, when the batch has no rows for them (``tableswap.sql``).
        group_id: the swap group it is a member of (its lineage is the group's run).
        register_staged: a stage registers the staged partitions on its temporary table (what Spark and Trino
            read the staged batch through); False only for a member of a group that publishes at the end of its
            block with no audit, which registers them itself if the group is not published.
    """

    table: str
    partitioned: bool = True
    replace_where: Any = None
    allow_empty: bool = False
    if_unchanged_since: str | None = None
    dry_run: bool = False
    checks: tuple[Check, ...] = ()
    keep_on_failure: bool = True
    kind: SwapKind | None = None
    verify: Callable[[Any], None] | None = None
    write_distribution: str | None = None
    input_conflicts: InputConflicts | None = None
    stored_values: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
    empty_partitions: tuple[tuple[str, ...], ...] = ()
    group_id: str | None = None
    register_staged: bool = True

    def __post_init__(self) -> None:
        if self.partitioned and self.allow_empty and self.replace_where is None:
            raise errors.InvalidInputError(
                "allow_empty=True needs replace_where: without a scope an empty batch replaces no partition")

    @property
    def swap_kind(self) -> SwapKind:
        """What the journal records the swap as."""
        return self.kind or SwapKind.of_swap(self.partitioned)


def checks_of(audit: Any) -> tuple[Check, ...]:
    """``audit=``: a check (a callable given the staged batch as a DataFrame), or a list of them."""
    if audit is None:
        return ()
    checks = tuple(audit) if isinstance(audit, (list, tuple)) else (audit,)
    bad = [c for c in checks if not callable(c)]
    if bad or not checks:
        raise errors.InvalidInputError(
            f"audit= takes a callable (given the staged batch as a DataFrame; it raises or returns False to "
            f"refuse it) or a list of them, not {bad[0] if bad else audit!r}")
    return checks


def first_refusal(checks: Sequence[Check], staged: Any, log: Any,
                  what: str) -> tuple[str, str, BaseException | None] | None:
    """Run the audit's ``checks`` on ``staged`` (a swap's batch, or a group's ``{table: batch}``) in order, each
    one that passes logged (``<what>.audit_passed``); the first refusal, a check that raised or returned
    ``False``: its name, why in words, and the exception it raised (None). None when every check passed."""
    for check in checks:
        name = _check_name(check)
        cause: BaseException | None = None
        try:
            ok = check(staged)
        except Exception as exc:  # noqa: BLE001 - any exception of a check is its refusal
            ok, cause = False, exc
        if ok is not False:
            log.info(f"{what}.audit_passed", check=name)
            continue
        return name, (f"{type(cause).__name__}: {cause}" if cause is not None else "it returned False"), cause
    return None


def _check_name(check: Any) -> str:
    name = getattr(check, "__qualname__", None) or getattr(check, "__name__", None) or type(check).__name__
    return str(name)


__all__ = ["Check", "SwapRequest", "checks_of", "first_refusal"]
