"""What each ``corrective-rag`` subcommand does, given its parsed arguments.

Handlers return the exit code and print results to stdout; errors are raised as the package's
own exceptions and turned into one line by :func:`corrective_rag.cli.main.main`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError

__all__ = [
    "cmd_batch",
    "cmd_demo",
    "cmd_history_diff",
    "cmd_history_export",
    "cmd_history_list",
    "cmd_history_plot",
    "cmd_history_show",
    "cmd_history_stats",
    "cmd_index",
    "cmd_run",
]

_ADD_BATCH = 256  # documents per store write: one progress step, bounded memory per call


def options(args: argparse.Namespace) -> Any:
    from corrective_rag.cli.wiring import Options

    model = args.model
    url = args.llm_url
    if url is None and model is not None:
        url = os.environ.get("OPENAI_BASE_URL") or None
    if url is not None and model is None:
        raise ConfigError("--llm-url needs --model NAME")
    if url is not None and args.local_llm:
        raise ConfigError("give either --llm-url or --local-llm, not both")
    if model is not None and url is None and not args.local_llm:
        raise ConfigError("--model needs --llm-url URL (or OPENAI_BASE_URL)")
    return Options(
        store=args.store,
        chroma_host=args.chroma_host,
        chroma_port=args.chroma_port,
        llm_url=url,
        model=model,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        local_llm=args.local_llm,
        policy=args.policy,
        max_iterations=args.max_iterations,
        top_k=args.top_k,
        min_relevant=args.min_relevant,
        qdrant=args.qdrant,
        qdrant_api_key=os.environ.get("QDRANT_API_KEY") or None,
    )


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def dump_json(obj: Any) -> str:
    """Indented JSON for ``--json`` outputs."""
    return json.dumps(obj, indent=2, ensure_ascii=False)


def results_path(text: str) -> Path:
    """A results file that must exist (checked here for a clear message)."""
    from corrective_rag.errors import InputError

    path = Path(text)
    if not path.is_file():
        raise InputError(f"results file not found: {path}")
    return path


def _beir_corpus(path: Path) -> Path | None:
    """``corpus.jsonl`` of a BEIR folder (not its queries.jsonl), or None for other paths."""
    if path.is_dir() and (path / "corpus.jsonl").is_file():
        return path / "corpus.jsonl"
    return path if path.name == "corpus.jsonl" else None


def _documents(args: argparse.Namespace) -> list[Any]:
    from corrective_rag.store.loaders import load_documents

    paths = [Path(p) for p in args.paths]
    for path in paths:
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
    beir = [c for c in map(_beir_corpus, paths) if c is not None]
    files = [p for p in paths if _beir_corpus(p) is None]
    # BEIR documents stay whole so their ids match the relevance judgements.
    docs = load_documents(beir, chunk_tokens=None, skip_empty=True) if beir else []
    if files:
        docs += load_documents(files, chunk_tokens=args.chunk_tokens, overlap=args.overlap)
    if not docs:
        raise InputError(f"no documents found in {', '.join(map(str, paths))}")
    return docs


def cmd_index(args: argparse.Namespace) -> int:
    """Add documents to the store, with a progress bar."""
    from tqdm import tqdm

    from corrective_rag.cli.wiring import open_store

    docs = _documents(args)
    store = open_store(options(args), create=True)
    with (
        store,
        tqdm(total=len(docs), unit="doc", file=sys.stderr, disable=args.no_progress) as bar,
    ):
        for start in range(0, len(docs), _ADD_BATCH):
            chunk = docs[start : start + _ADD_BATCH]
            store.upsert(chunk)
            bar.update(len(chunk))
    _out(f"indexed {len(docs)} documents into {args.qdrant or args.store or args.chroma_host}")
    return 0


def _table(result: Any) -> str:
    from corrective_rag.runs.report import render_run

    return render_run(result)


def cmd_run(args: argparse.Namespace) -> int:
    """Run one question and print its iteration table, kept documents and usage."""
    from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator
    from corrective_rag.inputs import check_query
    from corrective_rag.runs.codec import to_dict
    from corrective_rag.runs.report import render_kept

    # A bad question fails before the store and the embedding model load. A question typed as
    # bytes that are not UTF-8 reaches Python as lone surrogates and is refused here too.
    check_query(args.question, what="question")
    opts = options(args)
    if opts.llm_url:
        check_reachable(opts.llm_url)  # before loading the store and the embedding model
    with open_store(opts) as store, orchestrator(opts, store) as orch:
        result = orch.run(args.question)
    if args.json:
        _out(dump_json(to_dict(result)))
        return 0
    _out(_table(result))
    _out("")
    _out(render_kept(result))
    if result.answer is not None:
        _out(f"\nanswer: {result.answer.text}")
    return 0


def cmd_batch(args: argparse.Namespace) -> int:
    """Run a queries file into a results file; exit 1 when any query's last attempt failed."""
    from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator, run_one
    from corrective_rag.runs.batch import read_queries, run_batch

    opts = options(args)
    queries = read_queries(args.queries)  # a malformed file fails before any model loads
    if opts.llm_url:
        check_reachable(opts.llm_url)
    if args.ray is not None:
        return _batch_on_ray(args, opts, queries)
    with open_store(opts) as store, orchestrator(opts, store) as orch:
        summary = run_batch(
            queries,
            run_one(orch),
            out_path=args.out,
            concurrency=args.concurrency,
            shard=args.shard,
            progress=not args.no_progress,
            rerun_errors=not args.skip_errors,
        )
    return _report_batch(args, summary)


def _batch_on_ray(args: argparse.Namespace, opts: Any, queries: Any) -> int:
    """``batch --ray``: workers open the store server and the LLM themselves."""
    from corrective_rag.cli.wiring import RunnerFactory
    from corrective_rag.runs.batch import run_batch
    from corrective_rag.runs.ray_engine import RayEngine

    if not opts.chroma_host and not (opts.qdrant or "").startswith(("http://", "https://")):
        raise ConfigError(
            "--ray needs a store server (--chroma-host or --qdrant URL): a store folder is locked"
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
        engine=RayEngine(args.ray or None),
    )
    return _report_batch(args, summary)


def _report_batch(args: argparse.Namespace, summary: Any) -> int:
    _out(summary.render())
    if args.summary_json:
        Path(args.summary_json).write_text(dump_json(summary.to_dict()) + "\n", encoding="utf-8")
    if summary.failures:
        raise InputError(
            f"{summary.failures} of {summary.queries} queries failed (see {args.out}; "
            "run the same command again to retry them)"
        )
    return 0


def _records(path: str, *, latest: bool = True) -> list[Any]:
    from corrective_rag.runs.results import latest_records, read_results

    records = read_results(results_path(path))
    return latest_records(records) if latest else records


def cmd_history_list(args: argparse.Namespace) -> int:
    """One line per query of a results file."""
    from corrective_rag.runs.report import list_runs

    _out(list_runs(_records(args.results, latest=not args.all)))
    return 0


def _ok_result(path: str, key: str) -> Any:
    from corrective_rag.runs.report import find_record

    rec = find_record(_records(path), key)
    if rec.result is None:
        raise InputError(
            f"query {rec.id!r} failed: {rec.error.get('type')}: {rec.error.get('message')}"
        )
    return rec.result


def cmd_history_show(args: argparse.Namespace) -> int:
    """One run as a per-iteration table (or JSON)."""
    from corrective_rag.runs.codec import to_dict
    from corrective_rag.runs.report import render_kept

    result = _ok_result(args.results, args.id)
    if args.json:
        _out(dump_json(to_dict(result)))
    else:
        _out(_table(result))
        _out("")
        _out(render_kept(result))
    return 0


def cmd_history_diff(args: argparse.Namespace) -> int:
    """Two iterations of one run, or two runs (possibly from two files)."""
    from corrective_rag.runs.history import diff_iterations, diff_runs

    result = _ok_result(args.results, args.id)
    if args.iterations:
        i, j = args.iterations
        _out(diff_iterations(result, i, j))
    else:
        _out(diff_runs(result, _ok_result(args.other or args.results, args.run)))
    return 0


def cmd_history_stats(args: argparse.Namespace) -> int:
    """The batch summary of a results file."""
    from corrective_rag.runs.summary import summarize

    summary = summarize(_records(args.results, latest=False))
    _out(dump_json(summary.to_dict()) if args.json else summary.render())
    return 0


def cmd_history_export(args: argparse.Namespace) -> int:
    """CSV with one row per iteration."""
    from corrective_rag.runs.report import export_csv

    rows = export_csv(_records(args.results), args.csv)
    _out(f"wrote {rows} rows to {args.csv}")
    return 0


def cmd_history_plot(args: argparse.Namespace) -> int:
    """PNG figure of the batch."""
    from corrective_rag.runs.plot import plot

    _out(f"wrote {plot(results_path(args.results), args.out)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Index stdlib documentation offline and run a few questions through the loop."""
    from corrective_rag.cli.demo import run_demo

    run_demo(modules=args.modules, out=sys.stdout)
    return 0
