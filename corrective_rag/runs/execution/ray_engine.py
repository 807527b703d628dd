"""Run a batch's questions on a Ray cluster: one orchestrator per worker, lines back to the driver.

:func:`corrective_rag.runs.execution.batch.run_batch` keeps every guarantee it has with threads,
because only the questions travel: the driver (the process calling ``run_batch``) stays the one
writer, writes and fsyncs each line as its result arrives, skips finished ids on resume and, on
Ctrl-C, waits for the questions already running and writes them before it stops. Workers are Ray
actors; each builds its own runner once from the picklable ``runner_factory`` (open a store
server, make an LLM client) and turns questions into result lines.

A worker that dies mid-question (killed, out of memory, its machine gone) is replaced by a fresh
actor and its question is run again there, so the question's line is written once, when it
finally returns.
A question that kills its worker on every try gets an error line after ``task_retries`` reruns,
and the batch goes on (``run_batch`` reruns error lines on resume).

Ray is optional (``pip install corrective_rag[ray]``); it is imported only when a batch runs.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.execution.attempt import Runners, RunOne, attempt
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import error_line

__all__ = ["RayEngine", "RecordLine", "start_local_ray"]

log: Any = get_logger(__name__)

RecordLine = Callable[[dict[str, Any]], None]

# Reruns of a question whose worker died: enough to ride out a node lost to preemption or a
# one-off crash, few enough that a question which crashes its worker every time is given up soon.
DEFAULT_TASK_RETRIES = 2


class _Worker:
    """The actor: builds runners from the factory (one per actor thread) and runs questions."""

    def __init__(self, factory: Callable[[], RunOne]) -> None:
        self._runners = Runners(None, factory)

    def run(self, query: Query) -> dict[str, Any]:
        return attempt(self._runners, query).line  # only the line travels back


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray engine needs ray: pip install 'corrective_rag[ray]'") from exc
    return ray


_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def _loopback(address: str | None) -> bool:
    """True for no address (a new local node) or a cluster address on this machine's loopback."""
    if address is None:
        return True
    host = address.split("://", 1)[-1].rsplit(":", 1)[0]
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


def start_local_ray(
    ray: Any,
    *,
    address: str | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    num_cpus: int | None = None,
) -> None:
    """``ray.init`` with no dashboard; a node on this machine uses 127.0.0.1 only.

    For no ``address`` (a new local node) or a loopback one (joining such a node), the node's
    address is 127.0.0.1. ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: Ray
    turns a loopback address into the machine's external one (``resolve_ip_for_localhost``), so
    the node's servers and every worker's traffic would use the external interface, and a driver
    joining a loopback node would wait forever for a raylet at its external address. Ray's own
    switch for a single-machine node (``ray_constants.ENABLE_RAY_CLUSTER``, read when the node
    address is chosen) is turned off for this call only, and restored, so that a later
    ``ray.init`` joining a real cluster is unaffected. Any other address is joined as given.
    """
    options: dict[str, Any] = {
        "address": address,
        "include_dashboard": False,
        "configure_logging": False,  # libraries never configure logging
        "log_to_driver": False,
        "runtime_env": dict(runtime_env) if runtime_env else None,
    }
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if not _loopback(address):
        ray.init(**options)
        return
    try:
        ray_constants: Any = importlib.import_module("ray._private.ray_constants")
    except ImportError:  # pragma: no cover - a Ray without the switch: the address still asks
        ray_constants = None
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if saved is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(**options, _node_ip_address="127.0.0.1")
    finally:
        if saved is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved


class RayEngine:
    """Runs questions on Ray actors; pass it to ``run_batch(..., engine=RayEngine())``.

    ``run_batch``'s ``concurrency`` is the number of actors, each running one question at a time,
    so at most ``concurrency`` questions are in flight and Ctrl-C waits for no more than those.

    Args:
        address: a cluster's address (``"ray://head:10001"``, ``"head:6379"`` or ``"auto"``);
            ``None`` connects to the cluster this process already joined, or starts a local
            one listening on 127.0.0.1 only (stopped again when the batch ends; see
            :func:`start_local_ray`).
        num_cpus: CPUs each actor reserves. ``None`` reserves none (Ray's default for actors):
            right for LLM-bound questions, which wait on the network; give ``1`` when workers
            judge locally and are CPU-bound, so Ray spreads them over the cluster's cores.
        task_retries: how many times a question whose worker died is run again (>= 0).
        runtime_env: Ray's runtime environment for the job (e.g. ``{"env_vars": {...}}``),
            used when this engine connects or starts Ray.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: float | None = None,
        task_retries: int = DEFAULT_TASK_RETRIES,
        runtime_env: Mapping[str, Any] | None = None,
    ) -> None:
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"address must be a non-empty string or None, got {address!r}")
        if num_cpus is not None and (
            isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float) or num_cpus < 0
        ):
            raise ConfigError(f"num_cpus must be a number >= 0 or None, got {num_cpus!r}")
        if isinstance(task_retries, bool) or not isinstance(task_retries, int) or task_retries < 0:
            raise ConfigError(f"task_retries must be an integer >= 0, got {task_retries!r}")
        self.address = address
        self.num_cpus = num_cpus
        self.task_retries = task_retries
        self.runtime_env: dict[str, Any] | None = dict(runtime_env) if runtime_env else None

    def run(
        self,
        queries: Sequence[Query],
        factory: Callable[[], RunOne],
        record: RecordLine,
        *,
        concurrency: int,
    ) -> None:
        """Run ``queries`` on ``concurrency`` actors and ``record`` each line, in this thread.

        On ``KeyboardInterrupt`` no new question starts; those running finish, are recorded,
        and the interrupt propagates.
        """
        if not queries:
            return
        ray = _import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            start_local_ray(ray, address=self.address, runtime_env=self.runtime_env)
        try:
            self._run(ray, queries, factory, record, concurrency)
        finally:
            if started_here:
                ray.shutdown()

    def _run(
        self,
        ray: Any,
        queries: Sequence[Query],
        factory: Callable[[], RunOne],
        record: RecordLine,
        concurrency: int,
    ) -> None:
        # No Ray restarts or task retries: a lost worker is replaced here by a fresh actor and its
        # question requeued, so no other question is ever sent to an actor that is going down.
        actor_class = ray.remote(_Worker).options(
            max_restarts=0, max_task_retries=0, num_cpus=self.num_cpus or 0
        )
        actors = [actor_class.remote(factory) for _ in range(min(concurrency, len(queries)))]
        todo = list(reversed(queries))  # pop() from the end keeps the file's order
        running: dict[Any, tuple[Any, Query, float]] = {}
        reruns: dict[str, int] = {}

        def submit(actor: Any) -> None:
            q = todo.pop()
            running[actor.run.remote(q)] = (actor, q, time.perf_counter())

        def finish(ref: Any) -> Any:
            actor, q, start = running.pop(ref)
            try:
                line = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker died under this question
                ray.kill(actor, no_restart=True)
                actors[actors.index(actor)] = actor = actor_class.remote(factory)
                reruns[q.id] = reruns.get(q.id, 0) + 1
                log.warning("batch_worker_lost", id=q.id, error=type(exc).__name__)
                if reruns[q.id] <= self.task_retries:
                    todo.append(q)  # next up, on the fresh worker
                    return actor
                line = error_line(q.id, q.query, exc, time.perf_counter() - start)
            record(line)
            return actor

        try:
            for actor in actors:
                submit(actor)
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                actor = finish(ready[0])
                if todo:
                    submit(actor)
        except KeyboardInterrupt:
            log.warning("batch_interrupted_waiting", running=len(running))
            # Questions already running finish and are written: their work is not thrown away.
            while running:
                finish(next(iter(running)))
            raise
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)
