"""A process pool for the bench scripts that Ctrl-C or SIGTERM stops whole: no worker goes on training after its parent.

A SIGTERM reaches the parent only; `ProcessPoolExecutor` on its own would leave its spawned workers running their
jobs to the end. Inside `stoppable_pool`, any exception (a KeyboardInterrupt from `esper.cli.sigterm_as_interrupt`
included) cancels the queued jobs and terminates and joins every worker before it propagates. `stops_in_one_line`
turns Ctrl-C or SIGTERM into that KeyboardInterrupt and ends the script with one line and exit 130 or 143:

    with stops_in_one_line("probe.py"), stoppable_pool(2) as pool: ...
"""
import multiprocessing
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from tqdm import tqdm

from esper.cli import interrupt_status, sigterm_as_interrupt


def init_worker() -> None:
    "tqdm's bars share a lock, a multiprocessing semaphore by default: a thread lock, so a stopped worker leaks none."
    tqdm.set_lock(threading.RLock())


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the body is done, then act as they would have.

    A worker is spawned in two steps: the process starts, then the parent writes it what to run. Stopped between the
    two, the parent leaves a worker that prints a traceback of its own (`EOFError` in `spawn_main`).
    """
    got: list[int] = []
    held = {s: signal.signal(s, lambda n, _frame: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
        if got:
            signal.raise_signal(got[0])


@contextmanager
def stoppable_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    "A spawn-context `ProcessPoolExecutor` of `workers` processes whose workers are stopped on any exception."
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=init_worker) as pool:
        try:
            with signals_held():  # every worker spawned whole now (one per submit), none halfway when a stop comes
                for _ in range(workers):
                    pool.submit(int)
            yield pool
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in multiprocessing.active_children():
                proc.terminate()
                proc.join()
            raise


@contextmanager
def stops_in_one_line(prog: str, kept: str = "") -> Iterator[None]:
    "SIGTERM as KeyboardInterrupt in the body; either ends the script with `<prog>: <terminated|interrupted>[; kept]`."
    try:
        with sigterm_as_interrupt():
            yield
    except KeyboardInterrupt as e:
        word, code = interrupt_status(e)
        print(f"{prog}: {word}" + (f"; {kept}" if kept else ""), file=sys.stderr, flush=True)
        # The line above is the last word: an executor stopped mid-job can leave an exit hook that writes to a pipe its
        # workers' end already closed (concurrent.futures' `_python_exit`: "Exception ignored ... Bad file
        # descriptor"), which Python would print as a traceback after it.
        sys.unraisablehook = lambda unraisable: None
        sys.exit(code)
