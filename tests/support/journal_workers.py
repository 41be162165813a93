"""Process entry points for the journal concurrency tests (importable by spawned processes)."""

from __future__ import annotations

import traceback


def open_journal(url: str, barrier) -> str:
    from tableswap.journal import Journal

    try:
        barrier.wait(timeout=60)
        Journal(url).close()
        return "ok"
    except Exception:  # noqa: BLE001 - reported to the parent
        return traceback.format_exc()


def queue_displaced(url: str, barrier, swap_id: str, locations: list[str], rounds: int) -> str:
    """Commit the same swap with the same displaced locations, and queue them as orphans, ``rounds``
    times, starting together with the other workers."""
    from tableswap.journal import Journal

    try:
        journal = Journal(url)
        pairs = [(f"p={i}", location) for i, location in enumerate(locations)]
        barrier.wait(timeout=60)
        for _ in range(rounds):
            journal.commit(swap_id, pairs)
            journal.queue_orphans(swap_id, pairs[::-1])
        journal.close()
        return "ok"
    except Exception:  # noqa: BLE001
        return traceback.format_exc()


def janitor_claims(url: str, barrier, token: str, swap_id: str, locations: list[str], lease_s: float):
    """Claim every location like a janitor (queued rows), mark the claimed ones deleted; return the
    locations this worker claimed, or a traceback."""
    from tableswap.journal.queue import JanitorQueue
    from tableswap.journal import Journal

    try:
        journal = Journal(url)
        queue = JanitorQueue(journal)
        barrier.wait(timeout=60)
        mine = [location for location in locations
                if queue.claim(swap_id, location, token=token, lease_s=lease_s, queued=True,
                               holder=f"worker:{token}", is_dead=lambda holder: holder == "gone:1")]
        queue.record([(swap_id, location, "deleted", None) for location in mine], token)
        journal.close()
        return mine
    except Exception:  # noqa: BLE001
        return traceback.format_exc()


def _child(fn, index, results, barrier, args) -> None:
    results.put((index, fn(args[0], barrier, *args[1:])))


def run_together(fn, argsets: list[tuple], timeout_s: float = 120) -> list:
    """Run ``fn(args[0], barrier, *args[1:])`` in one spawned process per argument tuple, all
    released by one barrier; return their results in order."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(argsets))
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(fn, i, results, barrier, args)) for i, args in enumerate(argsets)]
    for p in procs:
        p.start()
    try:
        out = dict(results.get(timeout=timeout_s) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [out[i] for i in range(len(argsets))]


def register_units(url: str, barrier, worker: str, threads: int, rounds: int) -> str:
    """Register one new unit of the backfill ``b`` per call (a read of the units it has, then a write), from
    ``threads`` threads of this process, ``rounds`` times each, starting together with the other workers."""
    import threading

    from tableswap.journal import Journal
    from tableswap.journal.backfills import BackfillLog

    failures: list[str] = []

    def register(thread: int) -> None:
        try:
            log = BackfillLog(journal)
            for n in range(rounds):
                log.start("b", "db", "events", [f"{worker}-{thread}-{n}"])
        except Exception:  # noqa: BLE001 - reported to the parent
            failures.append(traceback.format_exc())

    try:
        journal = Journal(url)
        workers = [threading.Thread(target=register, args=(t,)) for t in range(threads)]
        barrier.wait(timeout=60)
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        journal.close()
        return failures[0] if failures else "ok"
    except Exception:  # noqa: BLE001
        return traceback.format_exc()
