"""Executors of a sweep: where its ensembles are trained; the driver (the process that
calls :func:`~markovlib.runs.sweep.sweep`) alone writes the result store.

- ``"local"``: one ensemble after the other, in this process, with its torch threads;
  with ``workers`` > 1, on the CPU, the ensembles are shared among that many worker
  processes of one torch thread each (spawned once and kept), which send back plain
  data as Ray's tasks do (a reader's re-run on both cores of a laptop).
- ``"ray"``: one Ray task per ensemble on a Ray cluster (``address``; None:
  ``$RAY_ADDRESS``, else a new single-machine cluster), ``cpus_per_task`` CPUs and
  ``gpus_per_task`` GPUs each (0.125: 8 ensembles share a GPU; ``device='auto'``: CUDA
  when ``gpus_per_task > 0``, else the CPU). A task whose worker died is retried (up to
  :data:`RAY_MAX_RETRIES` times); a task sends its results back as plain data (CPU
  tensors, the history frame, the provenance) and the driver rebuilds them. Each task
  trains with ``torch.set_num_threads(
  cpus_per_task)``: on the CPU its runs are bit for bit those of the local executor in a
  process with ``cpus_per_task`` torch threads. Every node needs this markovlib
  installed (and ray).

Ray is imported here, lazily (inside :func:`connect`: an optional heavy dependency),
only when the Ray executor runs: ``import markovlib`` never loads it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch

from .._checks import check_choice, check_int, check_number
from ..device import resolve_device
from ..train import TrainResult
from .spec import RunSpec, sources_of, train_specs
from .store import result_from_record

__all__ = [
    "EXECUTORS",
    "RAY_MAX_RETRIES",
    "ClusterUnreachable",
    "InfeasibleRequest",
    "WorkerLost",
    "end_pool",
    "train_chunks",
    "connect",
    "capped_processes",
    "memory_available",
]

EXECUTORS = ("local", "ray")
RAY_MAX_RETRIES = (
    3  # re-runs of a task whose worker process or node died (not of one that raised)
)
CONNECT_TIMEOUT = 5.0  # seconds to reach a cluster's address before giving up

Chunk = Sequence[RunSpec]
# the memory of one worker process (Python, torch and its ensemble): issue 71 saw 8
# training processes take 2.8 GB and 11 take 3.75 GB, 0.34-0.35 GB each
PROCESS_BYTES = 400 * 2**20


def memory_available() -> int | None:
    """Bytes of memory available to a new allocation (Linux: MemAvailable), or None
    where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def capped_processes(count: int, what: str, command: str = "markovlib") -> int:
    """``count`` processes (``what``: the option or variable that asks for them) at
    most the CPUs here and what free memory holds (:data:`PROCESS_BYTES` each), said
    in one line on stderr when capped: the one cap of every process count."""
    cpus = os.cpu_count() or 1
    free = memory_available()
    fits = cpus if free is None else max(1, min(cpus, free // PROCESS_BYTES))
    if count <= fits:
        return count
    why = (
        f"the {cpus} CPUs here"
        if fits == cpus
        else f"{fits}: {free / 2**30:.1f} GiB of memory free here, about "
        f"{PROCESS_BYTES / 2**20:.0f} MiB a process"
    )
    print(f"{command}: {what} {count} capped at {why}", file=sys.stderr)
    return fits


class ClusterUnreachable(ConnectionError):
    """No Ray cluster answers at :attr:`address` (:attr:`reason`: why; :attr:`hint`:
    what to try, or '')."""

    def __init__(self, address: str, reason: str = "", hint: str = ""):
        self.address, self.reason, self.hint = address, reason, hint
        super().__init__(
            f"cannot reach a Ray cluster at {address}"
            + (f" ({reason})" if reason else "")
            + (f"; {hint}" if hint else "")
        )


class InfeasibleRequest(ValueError):
    """A task asks for more of a resource than any node of the Ray cluster has: it
    would wait forever (:attr:`option`: the CLI option that asked for it)."""

    def __init__(self, option: str, what: str, asked: float, largest: float):
        self.option, self.asked, self.largest = option, asked, largest
        super().__init__(
            f"{asked:g} {what} per task, but the largest node of the Ray cluster "
            f"has {largest:g} (a task would wait forever); give at most {largest:g}"
        )


def _largest_node(ray, resource: str) -> float:
    """The most of ``resource`` one live node of the cluster has (the whole cluster's
    ``ray.cluster_resources()`` where nodes cannot be listed)."""
    nodes = [n for n in ray.nodes() if n.get("Alive", True)]
    if not nodes:
        return float(ray.cluster_resources().get(resource, 0))
    return max(float(n.get("Resources", {}).get(resource, 0)) for n in nodes)


def _check_feasible(ray, cpus: int, gpus: float) -> None:
    """Refuse (:class:`InfeasibleRequest`) a task that no node of the cluster can
    run: Ray would keep it pending, the sweep at 0 %, with no message."""
    for option, what, asked, resource in (
        ("--cpus-per-task", "CPUs", cpus, "CPU"),
        ("--gpus-per-task", "GPUs", gpus, "GPU"),
    ):
        largest = _largest_node(ray, resource)
        if asked > 0 and asked > largest:
            raise InfeasibleRequest(option, what, asked, largest)


def train_chunks(
    chunks: Sequence[Chunk],
    *,
    executor: str = "local",
    device: str | torch.device = "auto",
    compile: bool = False,
    address: str | None = None,
    cpus_per_task: int = 1,
    gpus_per_task: float = 0.0,
    stop_after: int | None = None,
    workers: int = 1,
    on_steps=None,
    sources: dict | None = None,
) -> Iterator[tuple[Chunk, list[TrainResult]]]:
    """Train each chunk (specs of one group) as one ensemble; yields (chunk, results) as
    each one finishes (``sources``: :func:`~markovlib.runs.spec.start_weights`'s).
    ``stop_after=s``: end each run after step s (verification);
    ``workers``: local worker processes on the CPU; ``on_steps(x)``: x more runs'
    worth of steps done (called as training goes, from this process)."""
    check_choice("executor", executor, EXECUTORS)
    cpus = check_int("cpus_per_task", cpus_per_task, 1)
    gpus = check_number("gpus_per_task", gpus_per_task, low=0.0)
    workers = check_int("workers", workers, 1)
    if executor == "local":
        if address is not None:
            raise ValueError(
                f"address is for executor='ray'; got address={address!r} with "
                "executor='local'"
            )
        chunks = list(chunks)
        on_cpu = resolve_device(device).type == "cpu"
        if pooled(len(chunks), workers) and on_cpu and not compile:
            return _pool_chunks(chunks, workers, stop_after, on_steps, sources)
        how = dict(device=device, compile=compile, stop_after=stop_after)
        return (
            (c, train_specs(c, on_step=_counter(c, on_steps), sources=sources, **how))
            for c in chunks
        )
    chunks = list(chunks)
    if not chunks:
        return iter(())
    ray, started = connect(
        address
    )  # here, not at the first result: an unreachable address fails first
    try:
        _check_feasible(ray, cpus, gpus)
    except InfeasibleRequest:
        if started:
            ray.shutdown()
        raise
    # 'auto': the GPU Ray assigns (it sets CUDA_VISIBLE_DEVICES), else the CPU, whatever
    # GPUs the node has
    device = ("cuda" if gpus > 0 else "cpu") if str(device) == "auto" else str(device)
    how = (device, compile, stop_after, sources)
    return _ray_chunks(ray, started, chunks, how, cpus, gpus)


def probe_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Raise :class:`ClusterUnreachable` unless a TCP connection to host:port opens
    within ``timeout`` seconds (``ray.init`` itself retries an unreachable address for
    minutes)."""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except ValueError:
        raise ClusterUnreachable(address, "give it as host:port") from None
    except OSError as e:
        raise ClusterUnreachable(address, e.strerror or type(e).__name__) from None


def connect(address: str | None = None):
    """(ray, started): ray connected to the cluster at ``address``; ``started`` if this
    call connected it (the caller then shuts it down). An existing connection
    (``ray.init`` done by the caller) is used as it is."""
    import ray  # optional heavy dependency: imported only when the Ray executor runs

    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address not in (None, "auto", current):
            raise ValueError(
                f"ray is connected to the cluster at {current}, not {address}: "
                "call ray.shutdown() "
                "first, or give address=None to use that cluster"
            )
        return ray, False
    if address not in (None, "auto", "local"):
        probe_address(address)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError) as e:
        hint = (
            ""
            if os.environ.get("RAY_AUTH_MODE") == "token"
            else "if it uses token authentication, set RAY_AUTH_MODE=token (and "
            "RAY_AUTH_TOKEN or ~/.ray/auth_token)"
        )
        raise ClusterUnreachable(
            address or "auto", str(e).split("\n")[0], hint
        ) from None
    finally:
        if (
            threading.current_thread() is threading.main_thread()
            and previous is not None
        ):
            signal.signal(
                signal.SIGTERM, previous
            )  # ray.init's own handler exits at once: keep the caller's
    return ray, True


def _counter(chunk: Chunk, on_steps):
    """An ``on_step`` reporting each step as a share of the ensemble's runs."""
    if on_steps is None:
        return None
    per_step = len(chunk) / chunk[0].train.steps
    return lambda step: on_steps(per_step)


def pooled(chunks: int, workers: int) -> bool:
    """Whether ``chunks`` ensembles on the CPU go to a pool of ``workers`` processes."""
    return workers > 1 and chunks > 1


def pool_started(workers: int) -> bool:
    """Whether this process already holds a pool of ``workers`` (its start is paid)."""
    return workers in _POOLS


_POOLS: dict[int, tuple] = {}  # workers: (the pool, its progress queue)


class WorkerLost(RuntimeError):
    """A worker process of a sweep ended before its ensemble did (killed, by kill -9
    or for want of memory): the pool is ended, the finished ensembles are stored."""


LOST = (
    "a training process ended before its ensemble did (killed, or out of memory?); "
    "the finished ensembles are stored: run again with fewer processes "
    "($MARKOVLIB_WORKERS=1) to train the rest"
)


def end_pool(pool: ProcessPoolExecutor, wait: bool = True) -> None:
    """Every process ``pool`` started (whenever it started it) terminated, then the
    pool shut down, its tasks not begun cancelled (``wait``: its thread joined)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=wait, cancel_futures=True)


def _pool(workers: int):
    """``workers`` spawned processes of one torch thread each, kept for the session
    (a chapter sweeps group after group), and the queue of their progress reports, given
    to each at its start (no manager process, which a kill could take away: a "Broken
    pipe" without a word of what to do); shut down at exit."""
    if workers not in _POOLS:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        queue = ctx.Queue()  # reports of a few bytes: each one write, whole
        pool = ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_one_thread, initargs=(queue,)
        )
        atexit.register(pool.shutdown, cancel_futures=True)
        _POOLS[workers] = pool, queue
    return _POOLS[workers]


_REPORTS = None  # in a worker process: its pool's progress queue (:func:`_pool`)


def _one_thread(reports) -> None:
    global _REPORTS
    worker_started()
    # a report never waits (a thread sends it), nor does the worker's exit for one
    # unread: a driver that stops reading (its sweep left unfinished) cannot hold it
    reports.cancel_join_thread()
    _REPORTS = reports


def worker_started() -> None:
    """A worker process of this library's pools (a sweep's, verify's checks): one torch
    thread; Ctrl-C ignored (the driver stops, its workers follow); tqdm's bars locked by
    a thread lock. tqdm's default, a multiprocessing RLock, is a named semaphore in each
    process that makes a bar, even a disabled one; a worker ended at a stop or killed
    leaves it, and Python's resource tracker then printed two lines ("2 leaked
    semaphore objects") after the command's one line."""
    from tqdm import tqdm

    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())


def _sources_for(chunk: Chunk, sources: dict | None) -> dict | None:
    """The part of ``sources`` that ``chunk`` starts from (what a worker is sent)."""
    if not sources:
        return None
    return {k: sources[k] for k in sources_of(chunk) if k in sources}


def _pool_task(chunk: Chunk, stop_after: int | None, sources=None) -> list[dict]:
    """A worker's ensemble on the CPU, its progress sent every 10 steps."""

    def report(step: int) -> None:
        if step % 10 == 0:
            _REPORTS.put(10 * len(chunk) / chunk[0].train.steps)

    results = train_specs(
        chunk, device="cpu", stop_after=stop_after, on_step=report, sources=sources
    )
    return [_plain(r) for r in results]


class _HeldSignals:
    """SIGINT and SIGTERM held while this thread waits on the pool: a stop raised
    inside ``wait`` or a queue call can leave a future's lock taken, and the pool's
    thread then blocks on it for ever at exit (CI, 2026-11-29: a Ctrl-C'd two-worker
    sweep printed its line and never ended). On leaving, each held signal goes, in
    turn, to the handler that was there before (a KeyboardInterrupt, a chapter's
    stop); a signal whose handler was not set from Python is not held."""

    def __init__(self):
        self.held, self.previous = [], {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not None:
                    self.previous[sig] = signal.signal(sig, self._hold)
        return self

    def _hold(self, signum, frame) -> None:
        self.held.append(signum)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for signum in self.held:
            signal.raise_signal(signum)


def _pool_chunks(chunks, workers, stop_after, on_steps, sources=None):
    """(chunk, results) as the worker processes finish their ensembles; a process
    that died (its pool broken, at work or idle) ends them in :class:`WorkerLost`
    after every ensemble finished before it."""
    pool, queue = _pool(workers)
    pending, lost = {}, False
    try:
        with _HeldSignals():
            for c in chunks:
                task = (_pool_task, c, stop_after, _sources_for(c, sources))
                pending[pool.submit(*task)] = c
        while pending:
            steps = []
            with _HeldSignals():
                done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                while not queue.empty():
                    steps.append(queue.get())
            for n in steps if on_steps is not None else ():
                on_steps(n)
            for job in sorted(done, key=lambda j: j.exception() is not None):
                chunk = pending.pop(job)
                yield (
                    chunk,
                    [result_from_record(s, p) for s, p in zip(chunk, job.result())],
                )
    except BrokenProcessPool:  # a process died: the pool is ended below
        lost = True
        raise WorkerLost(LOST) from None
    finally:
        if pending or lost:  # stopped early (Ctrl-C, SIGTERM, an error, a process
            # lost): end the workers now
            with _HeldSignals():  # a second Ctrl-C would leave a broken pool kept
                _stop_pool(workers)


def _stop_pool(workers: int) -> None:
    """Terminate the kept pool of ``workers`` processes (their ensembles in flight are
    lost; every finished one is stored) so that nothing trains after a stop."""
    end_pool(_pool(workers)[0], wait=False)
    _POOLS.clear()


def _plain(r: TrainResult) -> dict:
    """A result as plain data (CPU tensors, the history, the provenance)."""
    return {
        "weights": _cpu(r.model.state_dict()),
        "history": r.history,
        "metrics": {},
        "provenance": {**r.provenance, "seconds": r.seconds},
        "checkpoint_step": r.checkpoint_step,
        "checkpoint": None if r.checkpoint is None else _cpu(r.checkpoint),
    }


def _cpu(state: dict) -> dict:
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def _train_chunk(
    chunk: Chunk,
    device: str,
    compile: bool,
    threads: int,
    stop_after: int | None,
    sources: dict | None = None,
) -> list[dict]:
    """The Ray task: train one ensemble with ``threads`` torch threads; its results as
    plain data."""
    torch.set_num_threads(threads)
    return [
        _plain(r)
        for r in train_specs(
            chunk,
            device=device,
            compile=compile,
            stop_after=stop_after,
            sources=sources,
        )
    ]


def _ray_chunks(
    ray,
    started: bool,
    chunks: list[Chunk],
    how: tuple[str, bool, int | None, dict | None],
    cpus: int,
    gpus: float,
) -> Iterator[tuple[Chunk, list[TrainResult]]]:
    """Every chunk submitted at once as a task (``how``: device, compile,
    stop_after); (chunk, results) as tasks finish
    (``ray.wait``). Stopped early (Ctrl-C, SIGTERM, an error), ray is shut down if
    ``started`` (the cluster then ends the tasks in flight), otherwise the tasks in
    flight are cancelled."""
    pending = {}
    try:
        task = ray.remote(_train_chunk).options(
            num_cpus=cpus, num_gpus=gpus, max_retries=RAY_MAX_RETRIES
        )
        device, compile, stop_after, sources = how
        pending = {
            task.remote(
                chunk, device, compile, cpus, stop_after, _sources_for(chunk, sources)
            ): chunk
            for chunk in chunks
        }
        while pending:
            done, _ = ray.wait(
                list(pending), num_returns=1, timeout=1.0
            )  # wakes up for signals
            for ref in done:
                chunk = pending.pop(ref)
                yield (
                    chunk,
                    [
                        result_from_record(spec, plain)
                        for spec, plain in zip(chunk, ray.get(ref))
                    ],
                )
    finally:
        # the cluster ends a disconnected driver's tasks itself; cancelling them here
        # as well races with task replies in ray's core worker and can crash it
        # (ray PR 54798)
        if started:
            ray.shutdown()
        else:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except (
                    Exception
                ):  # the cluster or the connection is gone: nothing left to cancel
                    pass
