"""The ``corrective-rag`` command: index, run, batch, history, demo, mcp and judge-check.

Errors a user can cause print one line, ``corrective-rag: error: ...``, and exit 2 (usage) or 1
(anything else), without a traceback. Only this module reads environment variables
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``; ``TAVILY_API_KEY`` / ``BRAVE_API_KEY`` for the web
fallback, read in :mod:`corrective_rag.cli.commands`) and configures logging. The flags are
:mod:`corrective_rag.cli.parser`'s; what each subcommand does, :mod:`corrective_rag.cli.commands`'s.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from corrective_rag.cli.environment import secrets
from corrective_rag.cli.parser import EXIT_USAGE, PROG, build_parser
from corrective_rag.errors import ConfigError, CorrectiveRAGError
from corrective_rag.observe.logs import ROOT

__all__ = ["entry", "main"]  # build_parser: its home is corrective_rag.cli.parser

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT
EXIT_BROKEN_PIPE = 141  # the shell's convention for SIGPIPE: the reader of stdout went away
MAX_ERROR_CHARS = 4000  # of an error line: an error may quote a reply or a file of any size


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
