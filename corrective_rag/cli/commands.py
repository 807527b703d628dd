"""What each ``corrective-rag`` subcommand does, given its parsed arguments.

Handlers return the exit code and print results to stdout; errors are raised as the package's
own exceptions and turned into one line by :func:`corrective_rag.cli.main.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from corrective_rag.cli.options import options
from corrective_rag.errors import ConfigError, InputError, LLMError

__all__ = [
    "cmd_batch",
    "cmd_demo",
    "cmd_history_diff",
    "cmd_history_export",
    "cmd_history_list",
    "cmd_history_plot",
    "cmd_history_report",
    "cmd_history_show",
    "cmd_history_stats",
    "cmd_index",
    "cmd_judge_check",
    "cmd_mcp",
    "cmd_run",
]

ERROR_CHARS = 1000  # of a results file's error message shown by `history show`


def _out(text: str) -> None:
    """Print human-readable text: the API key hidden, control characters escaped."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact

    sys.stdout.write(printable(redact(text, secrets()), keep_newlines=True) + "\n")
    sys.stdout.flush()


def _out_json(obj: Any) -> None:
    """Print ``--json`` output: the exact text, the API key hidden, no raw control character."""
    sys.stdout.write(dump_json(obj) + "\n")
    sys.stdout.flush()


def dump_json(obj: Any) -> str:
    """Indented JSON for ``--json`` outputs, with the API key hidden.

    The text is exact (it decodes to what was recorded); characters a terminal would act on
    appear only as JSON escapes.
    """
    from corrective_rag.cli.environment import secrets
    from corrective_rag.text.display import json_safe
    from corrective_rag.text.secrets import redact_tree

    return json_safe(json.dumps(redact_tree(obj, secrets()), indent=2, ensure_ascii=False))


def quiet_progress() -> None:
    """Silence the progress bars of the libraries we load (``--no-progress``).

    sentence-transformers loads its weights through transformers, which draws a "Loading
    weights" bar; huggingface_hub draws its own. Both have a switch; neither reads our flag.
    """
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:  # pragma: no cover - installed with sentence-transformers
        pass
    # transformers reads huggingface_hub's switch when it is imported, so it is only told here
    # when it is loaded already: importing it for this cost seconds that an index on the ONNX
    # embedder (which never loads transformers' models) did not otherwise pay
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None:
        hf_logging.disable_progress_bar()


def results_path(text: str) -> Path:
    """A results file that must exist (checked here for a clear message)."""
    from corrective_rag.errors import InputError

    path = Path(text)
    if not path.is_file():
        raise InputError(f"results file not found: {path}")
    return path


def cmd_index(args: argparse.Namespace) -> int:
    """Add files to the store (a file's chunks replaced as one unit), with a progress bar."""
    from corrective_rag.store.indexing import read_paths
    from corrective_rag.store.loaders import UnreadableFileError, path_name

    if args.no_progress:
        quiet_progress()
    skipped: list[tuple[str, str]] = []
    docs = read_paths(
        args.paths,
        chunk_tokens=args.chunk_tokens,
        overlap=args.overlap,
        skip_unreadable=(lambda p, why: skipped.append((path_name(p), why)))
        if args.skip_unreadable
        else None,
    )
    try:
        report = _index(args, docs, skipped)
    except UnreadableFileError as exc:
        raise UnreadableFileError(f"{exc} (--skip-unreadable skips such files)") from exc
    changes = f"{report.replaced} stale chunks replaced, {report.pruned} pruned"
    _out(
        f"indexed {report.documents} documents from {report.files} files into "
        f"{args.qdrant or args.store or args.chroma_host} ({changes})"
    )
    if report.skipped:
        n = len(report.skipped)
        files = "file" if n == 1 else "files"
        _out(f"skipped {n} unreadable {files} (the store keeps what it had of them):")
        for path, why in report.skipped:
            _out(f"  {path}: {why}")
    return 0


def _index(args: argparse.Namespace, docs: Any, skipped: list[tuple[str, str]]) -> Any:
    """Write ``docs`` into the store ``args`` names, behind a progress bar; the report.

    A first ``index`` that fails before any document is stored removes what it created, so
    that no half-made store is left behind (a later one would refuse the folder).
    """
    import itertools

    from corrective_rag.cli.progress import ChunkProgress
    from corrective_rag.cli.wiring import open_store
    from corrective_rag.store.folders import NewFolder
    from corrective_rag.store.indexing import index_documents, input_bytes

    first = next(docs, None)  # a folder with nothing to index fails before a store is made
    if first is None:
        also = f" ({len(skipped)} unreadable files skipped)" if skipped else ""
        raise InputError(f"no documents found in {', '.join(args.paths)}{also}")
    opts = options(args, judged=False)  # indexing runs no judge
    local = opts.store or (opts.qdrant if not (opts.qdrant or "").startswith("http") else None)
    made = NewFolder(local) if local else None
    # shown from the first write on: a bad first file prints one line
    bar = ChunkProgress(input_bytes(args.paths), disable=args.no_progress)
    stored = 0
    try:
        with open_store(opts, create=True) as store:
            try:
                return index_documents(
                    store,
                    bar.track(itertools.chain([first], docs)),
                    roots=args.paths,
                    prune=args.prune,
                    progress=bar.update,
                    skipped=skipped,
                )
            except BaseException:
                stored = store.count() if made is not None and made.fresh else 0
                raise
    except BaseException:
        if made is not None and not stored:
            made.remove()
        raise
    finally:
        bar.close()


def _table(result: Any) -> str:
    from corrective_rag.runs.reports.report import render_run

    return render_run(result)


def _print_run(result: Any, *, as_json: bool) -> None:
    """One run: its JSON, or its iteration table and kept documents."""
    from corrective_rag.runs.records.codec import to_dict
    from corrective_rag.runs.reports.report import render_kept

    if as_json:
        _out_json(to_dict(result))
        return
    _out(_table(result))
    _out("")
    _out(render_kept(result))


def cmd_run(args: argparse.Namespace) -> int:
    """Run one question and print its iteration table, kept documents and usage."""
    from corrective_rag.calls.scope import call_scope
    from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator
    from corrective_rag.inputs import check_query
    from corrective_rag.runs.execution.failures import llm_failure

    # A bad question fails before the store and the embedding model load. A question typed as
    # bytes that are not UTF-8 reaches Python as lone surrogates and is refused here too.
    check_query(args.question, what="question")
    opts = options(args)
    if args.no_progress:
        quiet_progress()
    if opts.llm_url:
        check_reachable(opts.llm_url)  # before loading the store and the embedding model
    # Ctrl-C cancels the run's LLM calls in flight (see corrective_rag.cli.interrupts).
    with (
        open_store(opts) as store,
        orchestrator(opts, store) as orch,
        call_scope(cancel=_cancel_event(args)),
    ):
        result = orch.run(args.question)
    result = _redacted(result)  # before the table is laid out, so its columns stay aligned
    _print_run(result, as_json=args.json)
    if not args.json and result.answer is not None:
        _out(f"\nanswer: {result.answer.text}")
    failure = llm_failure(result)
    if failure is not None:  # printed above for the record, but not a success
        raise LLMError(f"every LLM call of this run failed: {failure}")
    return 0


def _redacted(result: Any) -> Any:
    """``result`` with the API key hidden in every text it holds (documents, queries, replies)."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.runs.records.codec import from_dict, to_dict
    from corrective_rag.text.secrets import redact_tree
    from corrective_rag.types import RunResult

    keys = secrets()
    return from_dict(RunResult, redact_tree(to_dict(result), keys)) if keys else result


def _cancel_event(args: argparse.Namespace) -> Any:
    interrupts = getattr(args, "interrupts", None)
    return interrupts.event if interrupts is not None else None


def _check_outside_stores(opts: Any, outputs: list[tuple[str, str | None]]) -> None:
    """Refuse an output path inside a store folder the command reads.

    A folder that holds no store is left to the store's own check (it is refused there).
    """
    from corrective_rag.cli.wiring import store_folders
    from corrective_rag.store.folders import check_outside_store, is_store

    for folder in store_folders(opts):
        if is_store(folder):
            check_outside_store(outputs, folder)


def cmd_batch(args: argparse.Namespace) -> int:
    """Run a queries file into a results file; exit 1 when any query's last attempt failed."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator, run_one
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.runs.execution.queries import read_queries
    from corrective_rag.runs.records.paths import check_output

    opts = options(args)
    # Nothing is run, and nothing written, when an output would replace an input or the other,
    # or lie inside a store being read (a summary over chroma.sqlite3 destroys the store).
    check_output(args.out, inputs=[("QUERIES", args.queries)], what="--out")
    _check_outside_stores(opts, [("--out", args.out), ("--summary-json", args.summary_json)])
    if args.summary_json:
        check_output(
            args.summary_json,
            inputs=[("QUERIES", args.queries)],
            outputs=[("--out", args.out)],
            what="--summary-json",
        )
    if args.no_progress:
        quiet_progress()
    queries = read_queries(args.queries)  # a malformed file fails before any model loads
    if opts.llm_url:
        check_reachable(opts.llm_url)
    if args.ray is not None:
        return _batch_on_ray(args, opts, queries)
    interrupts = getattr(args, "interrupts", None)
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(open_store(opts))
        orch = stack.enter_context(orchestrator(opts, store))
        # The first Ctrl-C only sets the event: run_batch polls it, cancels the queries in
        # flight and writes them as interrupted lines; a second Ctrl-C exits at once.
        cancel = stack.enter_context(interrupts.by_event_only()) if interrupts else None
        summary = run_batch(
            queries,
            run_one(orch),
            out_path=args.out,
            concurrency=args.concurrency,
            shard=args.shard,
            progress=not args.no_progress,
            rerun_errors=not args.skip_errors,
            rerun_changed=args.rerun_changed,
            secrets=secrets(),
            cancel=cancel,
        )
    return _report_batch(args, summary)


def _batch_on_ray(args: argparse.Namespace, opts: Any, queries: Any) -> int:
    """``batch --ray``: workers open the store server and the LLM themselves."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.cli.wiring import RunnerFactory
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.runs.execution.ray_engine import RayEngine

    if not opts.chroma_host and not (opts.qdrant or "").startswith(("http://", "https://")):
        raise ConfigError(
            "--ray needs a store server (--chroma-host or --qdrant URL): a store folder is "
            "on this machine only, where Ray workers on other nodes cannot open it"
        )
    if opts.local_llm:
        raise ConfigError("--ray needs --llm-url: each worker would start its own --local-llm")
    summary = run_batch(
        queries,
        runner_factory=RunnerFactory(opts),
        out_path=args.out,
        concurrency=args.concurrency,
        shard=args.shard,
        progress=not args.no_progress,
        rerun_errors=not args.skip_errors,
        rerun_changed=args.rerun_changed,
        engine=RayEngine(args.ray or None),
        secrets=secrets(),
    )
    return _report_batch(args, summary)


def _report_batch(args: argparse.Namespace, summary: Any) -> int:
    _out(summary.render())
    if args.summary_json:
        Path(args.summary_json).write_text(dump_json(summary.to_dict()) + "\n", encoding="utf-8")
    if summary.failures:
        again = (
            "run it again without --skip-errors to retry them"
            if args.skip_errors
            else "run the same command again to retry them"
        )
        raise InputError(
            f"{summary.failures} of {summary.queries} queries failed (see {args.out}; {again})"
        )
    return 0


def _records(path: str, *, latest: bool = True) -> list[Any]:
    from corrective_rag.runs.records.results import latest_records, read_results

    records = read_results(results_path(path))
    return latest_records(records) if latest else records


def cmd_history_list(args: argparse.Namespace) -> int:
    """One line per query of a results file."""
    from corrective_rag.runs.reports.report import list_runs

    _out(list_runs(_records(args.results, latest=not args.all)))
    return 0


def _ok_result(path: str, key: str) -> Any:
    from corrective_rag.runs.reports.report import find_record

    rec = find_record(_records(path), key)
    if rec.result is None:
        from corrective_rag.cli.environment import secrets
        from corrective_rag.errors import cut_text
        from corrective_rag.text.secrets import redact

        # a results file's error may be any size (a 100 MB reply quoted whole): show its head,
        # masked before it is cut so that no key is shown in part
        message = cut_text(redact(str(rec.error.get("message")), secrets()), ERROR_CHARS)
        raise InputError(f"query {rec.id!r} failed: {rec.error.get('type')}: {message}")
    return _redacted(rec.result)


def cmd_history_show(args: argparse.Namespace) -> int:
    """One run as a per-iteration table (or JSON)."""
    _print_run(_ok_result(args.results, args.id), as_json=args.json)
    return 0


def cmd_history_diff(args: argparse.Namespace) -> int:
    """Two iterations of one run, or two runs (possibly from two files)."""
    from corrective_rag.runs.reports.diff import diff_iterations, diff_runs

    result = _ok_result(args.results, args.id)
    if args.iterations:
        i, j = args.iterations
        _out(diff_iterations(result, i, j))
    else:
        _out(diff_runs(result, _ok_result(args.other or args.results, args.run)))
    return 0


def cmd_history_stats(args: argparse.Namespace) -> int:
    """The batch summary of a results file."""
    from corrective_rag.runs.reports.summary import summarize

    summary = summarize(_records(args.results, latest=False))
    if args.json:
        _out_json(summary.to_dict())
    else:
        _out(summary.render())
    return 0


def cmd_history_export(args: argparse.Namespace) -> int:
    """CSV with one row per iteration."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.runs.records.paths import check_output
    from corrective_rag.runs.reports.report import export_csv

    check_output(args.csv, inputs=[("RESULTS", args.results)], what="--csv")
    rows = export_csv(_records(args.results), args.csv, secrets=secrets())
    _out(f"wrote {rows} rows to {args.csv}")
    return 0


def cmd_history_plot(args: argparse.Namespace) -> int:
    """PNG figure of the batch."""
    from corrective_rag.runs.records.paths import check_output
    from corrective_rag.runs.reports.plot import plot

    check_output(args.out, inputs=[("RESULTS", args.results)], what="--out")
    _out(f"wrote {plot(results_path(args.results), args.out)}")
    return 0


def cmd_history_report(args: argparse.Namespace) -> int:
    """One self-contained HTML page: summary, sortable table, a timeline per question."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.runs.records.paths import check_output
    from corrective_rag.runs.reports.html import read_qrels, write_html

    inputs = [("RESULTS", args.results), ("--qrels", args.qrels), ("--compare", args.compare)]
    check_output(args.html, inputs=inputs, what="--html")
    qrels = read_qrels(args.qrels) if args.qrels else None
    compare = _records(args.compare, latest=False) if args.compare else ()
    records = _records(args.results, latest=False)
    out = write_html(records, args.html, qrels=qrels, compare=compare, secrets=secrets())
    _out(f"wrote {out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Index stdlib documentation offline and run a few questions through the loop."""
    from corrective_rag.cli.demo import run_demo

    run_demo(modules=args.modules, out=sys.stdout)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store's corrected search as MCP tools (:mod:`corrective_rag.cli.mcp_server`)."""
    from corrective_rag.cli.environment import secrets
    from corrective_rag.cli.mcp_server import parse_address, serve

    http = parse_address(args.http) if args.http else None
    opts = options(args)
    if not (opts.store or opts.chroma_host or opts.qdrant):  # a missing flag, not a missing store
        raise ConfigError("give --store DIR (or --chroma-host HOST, or --qdrant URL)")
    quiet_progress()  # no bars: a client shows the server's stderr as its log
    from corrective_rag.cli.mcp_http import TOKEN_VARIABLE

    # An empty variable is no token; any other value is checked (spaces, length) by serve.
    token = os.environ.get(TOKEN_VARIABLE) or None
    serve(
        opts,
        http=http,
        secrets=secrets(),
        allowed_hosts=tuple(args.allow_host or ()),
        token=token,
        share_runs=args.share_runs,
        max_waiting=args.max_waiting,
        max_calls=args.max_calls,
    )
    return 0


def cmd_judge_check(args: argparse.Namespace) -> int:
    """Grade pairs with known answers (see :mod:`corrective_rag.cli.judge_check`)."""
    from corrective_rag.cli.judge_check import run_judge_check as check

    return check(args)
