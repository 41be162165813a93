"""After a commit: run the post-commit hooks (:mod:`tableswap.hooks`) and record what they did.

A hook's failure is logged and recorded in the journal (``tableswap history`` shows it), never raised:
the operation it follows has committed already.
"""

from __future__ import annotations

from tableswap.core.plan import SwapPlan
from tableswap.core.records import HookOutcome
from tableswap.hooks import CommitEvent, run_hooks
from tableswap.logs import get_logger
from tableswap.runtime import Runtime

log = get_logger("tableswap.hooks")


def notify_readers(rt: Runtime, plan: SwapPlan, what: str) -> list[HookOutcome]:
    """Run ``rt``'s hooks for the committed ``plan`` (nothing for a no-op); returns their outcomes."""
    if not rt.hooks or plan.is_noop:
        return []
    outcomes = run_hooks(rt.hooks, CommitEvent.from_plan(plan, what), rt.settings.hooks.timeout_s)
    for o in outcomes:
        if o.ok:
            log.info("hook.ran", swap_id=plan.swap_id, hook=o.hook, seconds=o.seconds)
        else:
            log.warning("hook.failed", swap_id=plan.swap_id, hook=o.hook, seconds=o.seconds, error=o.error)
    try:
        rt.journal.record_hook_runs(plan.swap_id, outcomes)
    except Exception as exc:  # noqa: BLE001 - committed already: the log keeps the outcome
        log.warning("hook.record_failed", swap_id=plan.swap_id, error=str(exc))
    return outcomes
