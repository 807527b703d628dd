"""The ``corrective-rag`` command: index, run, batch, history, demo, mcp and judge-check.

Errors a user can cause print one line, ``corrective-rag: error: ...``, and exit 2 (usage) or 1
(anything else), without a traceback. Only this module reads environment variables
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``; ``TAVILY_API_KEY`` / ``BRAVE_API_KEY`` for the web
fallback, read in :mod:`corrective_rag.cli.commands`) and configures logging.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import structlog

from corrective_rag.cli.environment import secrets
from corrective_rag.errors import ConfigError, CorrectiveRAGError
from corrective_rag.observe.logs import ROOT

__all__ = ["build_parser", "entry", "main"]

PROG = "corrective-rag"
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
EXIT_BROKEN_PIPE = 141  # the shell's convention for SIGPIPE: the reader of stdout went away
VERBOSE_HELP = "log every step to stderr (before or after the command)"
MAX_ERROR_CHARS = 4000  # of an error line: an error may quote a reply or a file of any size
MAX_SECONDS = 1e6  # about 11.6 days: past that a deadline is a typo, and float time loses precision


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from exc
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return whole_number


_positive = _at_least(1)
_non_negative = _at_least(0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from exc
    if not 0 < value < MAX_SECONDS:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and less than {MAX_SECONDS:,.0f} seconds, got {text}"
        )
    return value


def _shard(text: str) -> tuple[int, int]:
    from corrective_rag.runs.execution.queries import parse_shard

    try:
        return parse_shard(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one ``corrective-rag: error:`` line like every other.

    An unknown flag is reported by the subcommand that was given it (``run --k 5`` points to
    ``corrective-rag run --help`` and suggests ``--top-k``), not by the top-level parser.
    """

    def error(self, message: str) -> NoReturn:
        hint = f" (see {self.prog} --help)"
        self.exit(EXIT_USAGE, f"{PROG}: error: {' '.join(message.split())}{hint}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner: argparse.ArgumentParser = getattr(parsed, "_parser", None) or self
            owner.error(f"unrecognized arguments: {' '.join(extras)}{_suggest(owner, extras)}")
        if hasattr(parsed, "_parser"):
            delattr(parsed, "_parser")
        return parsed


def _suggest(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """`` (did you mean --top-k?)`` for the first unknown flag that looks like one of ours."""
    import difflib

    flags = [f for action in parser._actions for f in action.option_strings if f.startswith("--")]
    for extra in extras:
        if not extra.startswith("-"):
            continue
        name = extra.split("=", 1)[0].lstrip("-")
        if not name:
            continue
        near = [f for f in flags if f.endswith("-" + name) or f[2:].startswith(name)]
        near = near or difflib.get_close_matches("--" + name, flags, n=1, cutoff=0.75)
        if near:
            return f" (did you mean {near[0]}?)"
    return ""


def _leaf(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand's parser: it takes ``-v`` too, and answers for flags it does not know."""
    p: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    p.add_argument(
        "--verbose", "-v", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
    )
    p.set_defaults(_parser=p)
    return p


def _store_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("store")
    g.add_argument("--store", metavar="DIR", help="folder of the persistent hybrid store")
    g.add_argument("--chroma-host", metavar="HOST", help="use a chroma server instead of --store")
    g.add_argument("--chroma-port", type=_positive, default=8000, metavar="PORT")
    g.add_argument(
        "--qdrant",
        metavar="URL",
        help="keep both legs in Qdrant: a server or cluster URL (key: $QDRANT_API_KEY), "
        "or a folder for its local mode (pip install 'corrective_rag[qdrant]')",
    )


def _pipeline_flags(p: argparse.ArgumentParser) -> None:
    """The store's flags and the loop's: what ``run``, ``batch`` and ``mcp`` take."""
    _store_flags(p)
    _loop_flags(p)


def _loop_defaults() -> dict[str, Any]:
    """The loop's flags at their defaults, for ``index``, which takes none of them.

    ``index`` reads its store through the same :func:`corrective_rag.cli.options.options`.
    """
    scratch = argparse.ArgumentParser(add_help=False)
    _loop_flags(scratch)
    return vars(scratch.parse_args([]))


def _loop_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("components and the loop")
    g.add_argument(
        "--llm-url",
        metavar="URL",
        help="OpenAI-compatible endpoint for the evaluator and rewriter "
        "(default: $OPENAI_BASE_URL when --model is given; otherwise the offline local ones)",
    )
    g.add_argument("--model", metavar="NAME", help="model name sent to the LLM endpoint")
    g.add_argument("--local-llm", metavar="GGUF", help="start an embedded llama.cpp server")
    g.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="most seconds one LLM call may take, retries included "
        "(default 60; 300 with --local-llm)",
    )
    g.add_argument(
        "--max-retries",
        type=_non_negative,
        default=None,
        metavar="N",
        help="retries of a failed LLM call (429, 5xx, timeouts; default 3)",
    )
    g.add_argument("--policy", default="general", help="filter policy preset (default general)")
    from corrective_rag.cli.judge_check import judge_flags

    judge_flags(g)
    g.add_argument("--max-iterations", type=_positive, default=3, metavar="N")
    g.add_argument("--top-k", type=_positive, default=5, metavar="K")
    g.add_argument("--min-relevant", type=_positive, default=None, metavar="N")
    g.add_argument(
        "--judge-cap",
        type=_positive,
        default=None,
        metavar="N",
        help="offline judge: keep at most N of a question's judged documents (default: no cap); "
        "set it to how many documents a question of your collection needs",
    )


def _fallback_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fallback: searched when CRAG judges an iteration ambiguous/incorrect")
    g.add_argument(
        "--fallback",
        choices=("searxng", "tavily", "brave"),
        help="web search API (tavily reads $TAVILY_API_KEY, brave $BRAVE_API_KEY)",
    )
    g.add_argument(
        "--fallback-url", metavar="URL", help="the SearxNG instance, or another API root"
    )
    g.add_argument("--fallback-store", metavar="DIR", help="a second local store as the fallback")
    g.add_argument(
        "--fetch-pages",
        action="store_true",
        help="read the top result pages, not only snippets (needs corrective_rag[web])",
    )
    g.add_argument(
        "--fetch-private",
        action="store_true",
        help="with --fetch-pages, also read pages on loopback, private and link-local addresses "
        "(an intranet search); refused by default",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``corrective-rag``."""
    parser = _Parser(
        prog=PROG, description="Retrieval that checks its documents and corrects its own queries."
    )
    parser.add_argument("--verbose", "-v", action="store_true", help=VERBOSE_HELP)
    from corrective_rag._version import __version__

    parser.add_argument(
        "--version", action="version", version=f"{PROG} {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _leaf(sub, "index", help="add files or a BEIR corpus to a store")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or BEIR corpus.jsonl")
    from corrective_rag.store.loaders import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP

    p.add_argument(
        "--chunk-tokens",
        type=_positive,
        default=DEFAULT_CHUNK_TOKENS,
        metavar="N",
        help=f"chunk size in the embedding model's tokens (default {DEFAULT_CHUNK_TOKENS})",
    )
    p.add_argument("--overlap", type=int, default=DEFAULT_OVERLAP, metavar="N")
    p.add_argument(
        "--prune",
        action="store_true",
        help="also delete documents of files no longer found under the given folders",
    )
    p.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="skip files that are not UTF-8 text, empty or binary (listed at the end) "
        "instead of stopping at the first",
    )
    p.add_argument("--no-progress", action="store_true")
    _store_flags(p)  # the loop's flags (--llm-url, --top-k, ...) are refused: index runs no loop
    p.set_defaults(handler="cmd_index", **_loop_defaults())

    p = _leaf(sub, "run", help="run one question through the corrective loop")
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no model-loading progress bar")
    _pipeline_flags(p)
    _fallback_flags(p)
    p.set_defaults(handler="cmd_run")

    p = _leaf(sub, "batch", help="run a queries JSONL file, resumable")
    p.add_argument("queries", metavar="QUERIES.jsonl")
    p.add_argument("--out", required=True, metavar="RESULTS.jsonl")
    p.add_argument("--concurrency", type=_positive, default=4, metavar="N")
    p.add_argument("--shard", type=_shard, default=None, metavar="I/N", help="0 <= I < N")
    p.add_argument("--skip-errors", action="store_true", help="do not rerun failed ids on resume")
    p.add_argument(
        "--rerun-changed",
        action="store_true",
        help="on resume, rerun ids whose question changed (default: keep the old answer, warn)",
    )
    p.add_argument("--summary-json", metavar="PATH", help="also write the summary as JSON")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the questions on a Ray cluster (a local one when no address is given); "
        "needs a store server and pip install 'corrective_rag[ray]'",
    )
    p.add_argument("--no-progress", action="store_true")
    _pipeline_flags(p)
    _fallback_flags(p)
    p.set_defaults(handler="cmd_batch")

    _history_parser(sub)

    p = _leaf(sub, "demo", help="index stdlib docs offline and run a few questions")
    p.add_argument(
        "--modules",
        type=_positive,
        default=None,
        metavar="N",
        help="index only the first N modules of the list (faster)",
    )
    p.set_defaults(handler="cmd_demo")

    p = _leaf(sub, "mcp", help="serve a store's corrected search to agents over MCP")
    from corrective_rag.cli.mcp_calls import MAX_CALLS, MAX_WAITING

    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="streamable HTTP at HOST:PORT (PORT alone: 127.0.0.1); default: stdio",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="a host name clients may use in Host/Origin besides loopback (repeat or comma-"
        "separate); needed, with a token in CORRECTIVE_RAG_MCP_TOKEN, to bind a public address",
    )
    p.add_argument(
        "--share-runs",
        action="store_true",
        help="every session reads every session's runs (default: a session sees its own)",
    )
    p.add_argument(
        "--max-calls",
        type=_positive,
        default=MAX_CALLS,
        metavar="N",
        help="tool calls run at once; more wait, the next free slot going to the client "
        f"running the fewest (default: {MAX_CALLS})",
    )
    p.add_argument(
        "--max-waiting",
        type=_non_negative,
        default=MAX_WAITING,
        metavar="N",
        help="tool calls that may wait, all clients together, one client at most a quarter; "
        f"past that a call is a 'server busy' error at once (default: {MAX_WAITING})",
    )
    _pipeline_flags(p)
    _fallback_flags(p)
    p.set_defaults(handler="cmd_mcp")

    from corrective_rag.cli.judge_check import add_judge_check_parser

    add_judge_check_parser(sub, _leaf, _seconds, _non_negative)
    return parser


def _history_parser(sub: Any) -> None:
    h = sub.add_parser("history", help="inspect a results JSONL file").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = _leaf(h, "list", help="one line per query")
    p.add_argument("results")
    p.add_argument("--all", action="store_true", help="every line, not only the last per id")
    p.set_defaults(handler="cmd_history_list")
    p = _leaf(h, "show", help="one run as a per-iteration table")
    p.add_argument("results")
    p.add_argument("id", help="query id or run id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler="cmd_history_show")
    p = _leaf(h, "diff", help="two iterations of a run, or two runs")
    p.add_argument("results")
    p.add_argument("id")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--iterations", nargs=2, type=_positive, metavar=("I", "J"))
    g.add_argument("--run", metavar="ID", help="the other run's query or run id")
    p.add_argument("--in", dest="other", metavar="RESULTS", help="file of the other run")
    p.set_defaults(handler="cmd_history_diff")
    p = _leaf(h, "stats", help="the batch summary")
    p.add_argument("results")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler="cmd_history_stats")
    p = _leaf(h, "export", help="CSV, one row per iteration")
    p.add_argument("results")
    p.add_argument("--csv", required=True, metavar="OUT.csv")
    p.set_defaults(handler="cmd_history_export")
    p = _leaf(h, "plot", help="PNG figure of the batch")
    p.add_argument("results")
    p.add_argument("--out", required=True, metavar="OUT.png")
    p.set_defaults(handler="cmd_history_plot")
    p = h.add_parser("report", help="one self-contained HTML page of the batch")
    p.add_argument("results")
    p.add_argument("--html", required=True, metavar="OUT.html")
    p.add_argument("--qrels", metavar="QRELS.tsv", help="BEIR qrels: adds the found share")
    p.add_argument("--compare", metavar="RESULTS", help="diff each question with this file's run")
    p.set_defaults(handler="cmd_history_report")


class _RedactingFilter(logging.Filter):
    """Hide the API key and escape control characters in stdlib log records (urllib3, chroma)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from corrective_rag.text.display import printable
        from corrective_rag.text.secrets import redact

        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let the handler report it as it always does
            return True
        record.msg = printable(redact(message, secrets()), keep_newlines=True)
        record.args = None
        return True


def _redact_event(_: Any, __: str, event: Any) -> Any:
    """A structlog processor: the key hidden and control characters escaped in every value.

    Placed before the renderer it cleans the event's values; after it, the rendered line (which
    may hold the text of an exception or another object's repr).
    """
    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact, redact_tree

    keys = secrets()
    if isinstance(event, str):
        return redact(event, keys)
    cleaned = redact_tree(dict(event), keys)
    return {k: printable(v) if isinstance(v, str) else v for k, v in cleaned.items()}


def configure_logging(verbose: bool) -> None:
    """Warnings and above to stderr by default; with ``--verbose`` every event, human-readable.

    Every line is cleaned by :func:`_redact_event`: no API key, no raw control characters.
    """
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactingFilter) for f in handler.filters):
            handler.addFilter(_RedactingFilter())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if verbose
        else structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,  # run_id on every event of a run
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            _redact_event,
            renderer,
            _redact_event,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Look sys.stderr up per logger, so a replaced stderr (tests, pagers) is honoured.
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
    # The package's own loggers write through ``logging`` (corrective_rag.observe.logs): give them
    # one handler that prints the rendered line as it is, on the stderr of the moment.
    package = logging.getLogger(ROOT)
    package.setLevel(logging.DEBUG)  # structlog's wrapper class filters by level already
    package.propagate = False
    if not any(isinstance(h, _RenderedLineHandler) for h in package.handlers):
        handler = _RenderedLineHandler()
        handler.addFilter(_RedactingFilter())
        package.addHandler(handler)


class _RenderedLineHandler(logging.StreamHandler):
    """Print a record's message alone (structlog rendered it) to ``sys.stderr`` as it is now."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        """The stream is always the current ``sys.stderr``; nothing to set."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``corrective-rag`` with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    configure_logging(args.verbose)
    from corrective_rag.cli import commands
    from corrective_rag.cli.interrupts import handle_interrupts

    try:
        with handle_interrupts(PROG) as interrupts:
            args.interrupts = interrupts
            code: int = getattr(commands, args.handler)(args)
        return code
    except ConfigError as exc:
        return _fail(exc, EXIT_USAGE)
    except BrokenPipeError:
        # the reader went away (`history list | head`): stop quietly, as `git log | head` does,
        # and keep the interpreter's last flush of stdout from failing again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (CorrectiveRAGError, OSError) as exc:
        return _fail(exc, EXIT_ERROR)
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, not the user's doing: one line, the traceback on request
        if args.verbose:
            raise
        return _fail(
            RuntimeError(f"internal error: {type(exc).__name__}: {exc} (rerun with --verbose)"),
            EXIT_ERROR,
        )


def entry() -> None:
    """The ``corrective-rag`` console script: :func:`main`, then exit with its code.

    After Ctrl-C the command's own clean-up has run (stores closed, results lines fsync'd), so
    the process ends at once instead of waiting for the interpreter to tear down the libraries
    it loaded (seconds with torch and chromadb): Ctrl-C exits within a fraction of a second.
    """
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _fail(exc: BaseException, code: int) -> int:
    from corrective_rag.errors import cut_text
    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact

    # masked before it is cut, so that no key is shown in part
    text = cut_text(redact(str(exc), secrets()), MAX_ERROR_CHARS)
    message = printable(" ".join(text.split())) or type(exc).__name__
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return code
