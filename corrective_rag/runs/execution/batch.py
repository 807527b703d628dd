"""Run many questions through the loop: concurrent, resumable, crash-safe, shardable.

Input is JSONL, one query per line: ``{"id": "q1", "query": "..."}`` (BEIR's ``{"_id", "text"}``
is accepted too). Output is the results JSONL of :mod:`corrective_rag.runs.records.results`:
one line per query, appended, flushed and fsync'd by the single writer (the calling thread) as
soon as the query finishes, so a crash or Ctrl-C loses no finished result. Rerunning with the
same output file skips ids already done; a torn last line left by a killed process is cut off
first.

Policies, chosen once:

* Input: strict. A malformed line, a missing or empty id or query, or a repeated id raises
  :class:`InputError` naming the line before anything runs (blank lines are ignored).
* A query that raises (LLM down past its retries, bad input, any ``Exception``), or whose
  every LLM call failed, gets an error line and the batch goes on; when the first queries all
  fail with the same permanent LLM failure (a wrong key, URL or model), the batch stops and
  says what to fix.
* Ctrl-C (or the ``cancel`` event) cancels the running queries' LLM calls and writes each of
  them as an ``interrupted`` error line.
* Every way out (the end, Ctrl-C, a permanent failure, an error writing the results file)
  stops the worker threads and waits for them to leave their queries before ``run_batch``
  returns or raises: none goes on paying for LLM calls, none is inside native code at exit.
* Resume: ok ids are skipped; ids whose last line is an error are run again, unless
  ``rerun_errors=False``. An id whose question changed keeps its answer with a warning naming
  it, or is run again with ``rerun_changed=True``. The last line of an id wins when reading back.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import ConfigError, InputError, LLMResponseError
from corrective_rag.inputs import check_int
from corrective_rag.observe.logs import get_logger
from corrective_rag.runs.execution.attempt import (
    Finished,
    Runners,
    RunOne,
    attempt,
    interrupted_line,
)
from corrective_rag.runs.execution.failures import permanent_failure
from corrective_rag.runs.execution.queries import (
    Query,
    check_ids,
    check_shard,
    in_shard,
    read_queries,
)
from corrective_rag.runs.records.jsonl import MAX_RECORD_LINE_BYTES
from corrective_rag.runs.records.paths import same_file
from corrective_rag.runs.records.results import (
    ResultRecord,
    error_line,
    read_results,
    record_of,
    repair_torn_tail,
)
from corrective_rag.runs.reports.summary import BatchSummary, summarize
from corrective_rag.text.secrets import redact_tree

# run_batch: its home is corrective_rag
__all__ = ["Engine"]

log: Any = get_logger(__name__)

_PROBE = 3  # first results that, all failing with the same permanent error, stop the batch
_POLL = 0.1  # seconds between checks of the cancel event while waiting for results
# How long run_batch waits, in all, for workers to leave their queries once it stops them. Their
# LLM calls are cancelled, so this is the rest of a query's local work (retrieval, embedding),
# well below this bound; only a query stuck in user code that ignores cancellation waits it out,
# and a second Ctrl-C ends the command at once anyway.
_JOIN_SECONDS = 10.0


class Engine(Protocol):
    """Runs a batch's questions elsewhere (e.g. ``runs.execution.ray_engine.RayEngine``)."""

    def run(
        self,
        queries: Sequence[Query],
        factory: Callable[[], RunOne],
        record: Callable[[dict[str, Any]], None],
        *,
        concurrency: int,
    ) -> None:
        """Run ``queries``, ``concurrency`` at once, and ``record`` each line in this thread.

        Runners are built by ``factory`` where the questions run. On ``KeyboardInterrupt``,
        record the questions already running, then let the interrupt go.
        """
        ...


class _Writer:
    """Appends whole lines to the results file, one ``write`` and one ``fsync`` per line.

    Every string of a line (query, documents, replies, error messages) is cleared of
    ``secrets`` first: this is the one place a batch writes, so nothing else can leak them.
    """

    def __init__(self, path: Path, *, fsync: bool, secrets: Sequence[str] = ()) -> None:
        if path.is_dir():
            raise InputError(f"results path {path} is a folder, not a file")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = fsync
        self._secrets = tuple(secrets)
        self.path = path
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX: no lock, documented
            pass
        except OSError as exc:
            os.close(self._fd)
            raise InputError(f"another batch is writing to {path}") from exc

    def write(self, obj: Mapping[str, Any]) -> None:
        data = self._encoded(obj)
        if len(data) > MAX_RECORD_LINE_BYTES:  # a line no reader would take back: say so
            too_long = InputError(
                f"the run's result is {len(data):,} bytes as JSON, more than a results line "
                f"holds ({MAX_RECORD_LINE_BYTES:,})"
            )
            data = self._encoded(error_line(obj["id"], obj["query"], too_long, obj["seconds"]))
        view = memoryview(data)
        while view:  # os.write may write less than asked; never leave half a line behind
            view = view[os.write(self._fd, view) :]
        if self._fsync:
            os.fsync(self._fd)

    def _encoded(self, obj: Mapping[str, Any]) -> bytes:
        obj = redact_tree(dict(obj), self._secrets)
        try:
            return (json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in an error message: escape, never crash
            return (json.dumps(obj, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")

    def close(self) -> None:
        os.close(self._fd)


_CHANGED_SHOWN = 20  # ids named in the warning; the count says how many more


def _done_ids(
    path: Path, mine: Sequence[Query], *, rerun_errors: bool, rerun_changed: bool
) -> tuple[set[str], list[ResultRecord]]:
    """Ids of ``mine`` that resume skips, and the records the file holds already.

    Skipped: done before, as the same question. An id whose question changed since its line
    was written keeps its old answer (with a warning naming it), unless ``rerun_changed``.
    """
    if not path.exists():
        return set(), []
    repair_torn_tail(path)
    earlier = read_results(path)
    last = {rec.id: rec for rec in earlier}
    done = {qid for qid, rec in last.items() if rec.ok or not rerun_errors}
    changed = [q.id for q in mine if q.id in done and last[q.id].query != q.query]
    if changed:
        log.warning(
            "batch_questions_changed",
            count=len(changed),
            ids=changed[:_CHANGED_SHOWN],
            action="running them again"
            if rerun_changed
            else "kept the answers to the old "
            "questions; pass rerun_changed=True (CLI: --rerun-changed) to run them again",
        )
    return (done - set(changed) if rerun_changed else done), earlier


def _same_permanent_failure(lines: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The one permanent failure every line of ``lines`` reports, if they all report the same."""
    found = set()
    for line in lines:
        if line["status"] == "ok":
            return None
        failure = permanent_failure(str(line["error"].get("message", "")))
        if failure is None:
            return None
        found.add(failure)
    return found.pop() if len(found) == 1 else None


class _Workers:
    """Daemon threads running queries; the calling thread records what they finish.

    Daemon threads, so that a query stuck in user code never keeps an interrupted process alive;
    each query runs in a call scope tied to ``cancel`` and to :meth:`stop`, so that stopping
    cancels its LLM calls, and :meth:`join` waits until every worker has left its query.
    """

    def __init__(
        self, runners: Runners, todo: Sequence[Query], concurrency: int, cancel: threading.Event
    ) -> None:
        self._runners = runners
        self._todo = deque(todo)
        self._cancel = cancel
        self._halt = threading.Event()  # stop(): the caller's ``cancel`` is left as it was
        self._lock = threading.Lock()
        self._running: dict[str, tuple[Query, float]] = {}
        self.finished: queue.Queue[Finished] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._work, name="crag-batch", daemon=True)
            for _ in range(min(concurrency, len(todo)))
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._halt.is_set() or self._cancel.is_set() or not self._todo:
                    return
                q = self._todo.popleft()
                started = time.perf_counter()
                self._running[q.id] = (q, started)
            try:
                with call_scope(cancel=self._cancel), call_scope(cancel=self._halt):
                    done = attempt(self._runners, q)
            except BaseException as exc:  # never leave the recorder waiting for this query
                done = Finished(error_line(q.id, q.query, exc, time.perf_counter() - started))
            with self._lock:
                if self._halt.is_set() or self._cancel.is_set():
                    return  # left in _running: stop() writes it as interrupted
                del self._running[q.id]
                self.finished.put(done)

    def stop(self) -> tuple[list[Finished], list[Finished]]:
        """Start nothing more, cancel what runs: (queries finished before, interrupted ones)."""
        with self._lock:
            self._halt.set()
            running = list(self._running.values())
        done = []
        while not self.finished.empty():
            done.append(self.finished.get_nowait())
        now = time.perf_counter()
        return done, [Finished(interrupted_line(q, now - started)) for q, started in running]

    def join(self) -> None:
        """Wait for every worker to leave its query (cancelled calls end at once).

        A worker still inside a query when the interpreter exits can abort the process from
        native code ("terminate called without an active exception"), and one left running keeps
        paying for LLM calls nobody will record: no exit path of ``run_batch`` skips this.
        """
        deadline = time.monotonic() + _JOIN_SECONDS
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self._threads if t.is_alive()]
        if alive:  # a query stuck in user code that ignores cancellation: say so, never hang
            log.warning("batch_workers_still_running", workers=len(alive))


@contextlib.contextmanager
def _progress(total: int, enabled: bool, stream: IO[str] | None) -> Iterator[Any]:
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, file=stream or sys.stderr, unit="q", dynamic_ncols=True)
    try:
        yield bar
    finally:
        bar.close()


def run_batch(
    queries: Sequence[Query] | str | os.PathLike[str],
    run_one: RunOne | None = None,
    *,
    out_path: str | os.PathLike[str],
    runner_factory: Callable[[], RunOne] | None = None,
    concurrency: int = 4,
    shard: tuple[int, int] | None = None,
    progress: bool = True,
    rerun_errors: bool = True,
    rerun_changed: bool = False,
    fsync: bool = True,
    progress_stream: IO[str] | None = None,
    secrets: Sequence[str] = (),
    cancel: threading.Event | None = None,
    engine: Engine | None = None,
) -> BatchSummary:
    """Run every query, appending one line per query to ``out_path``.

    Args:
        queries: :class:`Query` values or the path of a queries JSONL file.
        run_one: a thread-safe callable turning a question into a :class:`RunResult` (e.g.
            ``orchestrator.run``), shared by all worker threads.
        out_path: the results JSONL file; created, or resumed when it exists.
        runner_factory: instead of ``run_one``: builds one callable per worker thread, for
            components that are not thread-safe. Give exactly one of the two.
        concurrency: queries in flight at once (threads).
        shard: ``(i, n)`` to run only the ids whose stable hash falls in share ``i`` of ``n``.
        progress: show a tqdm bar on stderr (done, failed, rate, ETA).
        rerun_errors: run ids whose last line is an error again (default); ``False`` skips them.
        rerun_changed: run again the ids whose question differs from the one their last line
            answered. Without it they keep that answer, and a ``batch_questions_changed``
            warning names them.
        fsync: fsync after every line (crash-safe against power loss, not only process death).
        progress_stream: where the bar goes, stderr by default.
        secrets: strings (an API key) replaced by ``***`` in every line written, whatever
            their source; see :mod:`corrective_rag.text.secrets`.
        cancel: setting this event stops the batch as Ctrl-C does (e.g. from a signal handler).
        engine: run the questions there instead of in threads (e.g. ``RayEngine()``); needs a
            picklable ``runner_factory``. The results file is still written here, by one writer.

    Returns:
        The summary over the last line of every query of this batch (and shard), including
        those skipped as already done. On Ctrl-C (or ``cancel``) no query is started, the LLM
        calls of running queries are cancelled, each running query gets an ``interrupted``
        error line (run again on resume) and ``KeyboardInterrupt`` propagates.

    Raises:
        ConfigError: bad arguments. InputError: a bad queries file, a results file that is not
        a results file (or is the queries file itself), or another batch writing to it.
        LLMResponseError: the first queries all failed with the same permanent LLM failure
        (HTTP 401, 403, 404, unknown model); the message says what to fix.
    """
    if (run_one is None) == (runner_factory is None):
        raise ConfigError("give exactly one of run_one and runner_factory")
    if engine is not None and runner_factory is None:
        raise ConfigError("an engine needs runner_factory (picklable), not run_one")
    check_int(concurrency, "concurrency", minimum=1)
    if shard is not None:
        check_shard(shard)
    if cancel is not None and not isinstance(cancel, threading.Event):
        raise ConfigError(f"cancel must be a threading.Event or None, got {cancel!r}")
    cancel = cancel if cancel is not None else threading.Event()
    items: list[Any] = []
    if isinstance(queries, str | os.PathLike):
        if same_file(out_path, queries):
            raise InputError(
                f"results file {out_path} is the queries file {queries}: refusing to append to it"
            )
        items = read_queries(queries)
    elif isinstance(queries, Sequence) and all(isinstance(q, Query) for q in queries):
        items = list(queries)
    else:
        raise InputError("queries must be a queries file path or a sequence of Query values")
    check_ids(items)  # unique, and no two that look the same
    mine = [q for q in items if in_shard(q.id, shard)]
    out = Path(out_path)
    # Lock first, so two batches never repair the same file.
    writer = _Writer(out, fsync=fsync, secrets=secrets)
    started = time.perf_counter()
    interrupted = False
    try:
        done, earlier = _done_ids(out, mine, rerun_errors=rerun_errors, rerun_changed=rerun_changed)
        todo = [q for q in mine if q.id not in done]
        skipped = len(mine) - len(todo)
        log.info("batch_started", queries=len(mine), todo=len(todo), skipped=skipped)
        runners = Runners(run_one, runner_factory)
        with _progress(len(todo), progress, progress_stream) as bar:
            counts = {"ok": 0, "failed": 0}
            written: list[dict[str, Any]] = []
            records: list[ResultRecord] = []  # this run's lines, as the file reads them back

            def record(finished: Finished) -> None:
                line = finished.line
                writer.write(line)
                records.append(record_of(line, finished.result))
                if len(written) < _PROBE:
                    written.append(line)
                counts["ok" if line["status"] == "ok" else "failed"] += 1
                if bar is not None:
                    bar.set_postfix(counts, refresh=False)
                    bar.update(1)

            if engine is not None and runner_factory is not None:
                try:
                    # The engine calls record() here, in this thread: still one writer.
                    engine.run(
                        todo,
                        runner_factory,
                        lambda line: record(Finished(line)),
                        concurrency=concurrency,
                    )
                except KeyboardInterrupt:
                    interrupted = True
                    log.warning("batch_interrupted", written=sum(counts.values()))
                    raise
            else:
                workers = _Workers(runners, todo, concurrency, cancel)
                left = len(todo)
                permanent = None
                try:
                    try:
                        while left:
                            if cancel.is_set():
                                raise KeyboardInterrupt
                            try:
                                finished = workers.finished.get(timeout=_POLL)
                            except queue.Empty:
                                continue
                            record(finished)
                            left -= 1
                            if len(written) == min(_PROBE, len(todo)) == counts["failed"]:
                                permanent = _same_permanent_failure(written)
                                if permanent is not None and left:
                                    break
                    except KeyboardInterrupt:
                        interrupted = True
                    if interrupted or (permanent is not None and left):
                        finished_before, cut = workers.stop()
                        for finished in [*finished_before, *cut]:
                            record(finished)
                        log.warning(
                            "batch_stopped", written=sum(counts.values()), interrupted=len(cut)
                        )
                finally:
                    # Every way out (the end, Ctrl-C, a permanent failure, a recorder error such
                    # as a full disk) stops the workers and waits for them to leave their query.
                    workers.stop()
                    workers.join()
                if interrupted:
                    raise KeyboardInterrupt
                if permanent is not None and left:
                    status, hint = permanent
                    raise LLMResponseError(
                        f"batch stopped: its first {len(written)} queries all failed alike: "
                        f"{hint}. Fix that and run the same command again to resume",
                        status=status,
                    )
    finally:
        writer.close()
        if not interrupted:
            log.info("batch_finished", seconds=round(time.perf_counter() - started, 3))
    # From what this run recorded and what the file held before: reading the file back would
    # decode every line again (about 1.6 ms each), seconds at the end of a large batch.
    return summarize(
        [*earlier, *records],
        ids=[q.id for q in mine],
        skipped=skipped,
        wall_seconds=time.perf_counter() - started,
        interrupted=interrupted,
    )
