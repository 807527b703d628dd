"""The search behind the MCP tools: the corrective loop over one store, and each client's runs.

:class:`SearchService` opens the store and builds the loop on the first call (as ``run`` builds
them, from the command's ``Options``), runs a question, remembers the last :data:`MAX_RUNS` runs
with the client that made each, and reads them back to that client only (to every client with
``share_runs``). What the MCP protocol adds (tools, resources, who a client is, transports) is
:mod:`corrective_rag.cli.mcp_server`; the values returned, :mod:`corrective_rag.cli.mcp_shapes`;
how calls are admitted, :mod:`corrective_rag.cli.mcp_calls`.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from corrective_rag.cli.mcp_calls import MAX_CALLS, MAX_WAITING, FairCalls
from corrective_rag.cli.mcp_shapes import (
    MAX_DOCUMENTS,
    RUNS_URI,
    AnswerOut,
    SearchOut,
    answer_fields,
    run_entry,
    summary,
)
from corrective_rag.errors import ConfigError, InputError, LLMError
from corrective_rag.inputs import check_query

if TYPE_CHECKING:
    from corrective_rag.cli.wiring import Options
    from corrective_rag.types import RunResult

__all__ = ["MAX_QUESTION_CHARS", "MAX_RUNS", "SearchService", "check_question", "check_top_k"]

MAX_RUNS = 100  # runs kept for the resources; older ones are forgotten
MAX_QUESTION_CHARS = 4000  # a question longer than a page is not a question (refused)


class SearchService:
    """The corrective loop over one store, opened on first use, with every client's runs.

    Thread-safe: tool calls run in worker threads. ``close`` releases the store (and an
    embedded LLM server).
    """

    def __init__(
        self,
        opts: Options,
        *,
        secrets: tuple[str, ...] = (),
        share_runs: bool = False,
        max_calls: int = MAX_CALLS,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        self.opts = opts
        self.secrets = secrets
        self.share_runs = share_runs
        self.calls: FairCalls = FairCalls(max_calls, max_waiting=max_waiting)
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._orch: Any = None
        self._runs: OrderedDict[str, tuple[str | None, RunResult]] = OrderedDict()

    @property
    def answers(self) -> bool:
        """True when an LLM was given, so that the ``answer`` tool can write answers."""
        return bool(self.opts.llm_url or self.opts.local_llm)

    def _orchestrator(self) -> Any:
        """The loop, built on first use; a failure is raised again on the next call's try.

        Built as ``run`` builds it (:func:`corrective_rag.cli.wiring.orchestrator` from the
        ``Options`` the command's flags made), so every pipeline flag reaches it.
        """
        with self._lock:
            if self._orch is None:
                from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator

                if self.opts.llm_url:
                    check_reachable(self.opts.llm_url)
                with contextlib.ExitStack() as stack:
                    store = stack.enter_context(open_store(self.opts))
                    self._orch = stack.enter_context(orchestrator(self.opts, store))
                    self._stack = stack.pop_all()
            return self._orch

    def _run(self, question: str, top_k: int | None) -> RunResult:
        check_question(question)
        check_top_k(top_k)
        result: RunResult = self._orchestrator().run(question)
        from corrective_rag.runs.execution.failures import llm_failure

        failure = llm_failure(result)
        if failure is not None:  # nothing was judged: an empty result would look like an answer
            raise LLMError(f"every LLM call of this run failed: {failure}")
        return result

    def _remember(self, result: RunResult, owner: str | None) -> RunResult:
        from corrective_rag.runs.records.codec import from_dict, to_dict
        from corrective_rag.text.secrets import redact_tree
        from corrective_rag.types import RunResult

        if self.secrets:
            result = from_dict(RunResult, redact_tree(to_dict(result), self.secrets))
        with self._lock:
            self._runs[result.run_id] = (owner, result)
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        return result

    def search(
        self, question: str, top_k: int | None = None, *, owner: str | None = None
    ) -> SearchOut:
        """Run the corrective loop on ``question``; the kept documents and how the run ended.

        ``top_k`` caps the documents returned (best first); ``owner`` is the client the run
        is listed for (unless runs are shared).
        """
        return summary(self._remember(self._run(question, top_k), owner), top_k)

    def answer(
        self, question: str, top_k: int | None = None, *, owner: str | None = None
    ) -> AnswerOut:
        """Search, then answer from the kept documents only, citing their ids (or abstain)."""
        if not self.answers:
            raise ConfigError("answers need an LLM: start the server with --llm-url and --model")
        from corrective_rag.generate.llm import LLMGenerator

        result = self._run(question, top_k)
        chat = getattr(self._orch.evaluator, "chat", None)
        if chat is None:  # pragma: no cover - the wiring's LLM evaluator always has one
            raise ConfigError("the judge has no chat model to answer with")
        answer = LLMGenerator(chat).generate(question, [k.document for k in result.kept])
        result = self._remember(replace(result, answer=answer), owner)
        out: Any = {**summary(result, top_k), **answer_fields(result)}
        return out  # the TypedDict's fields, merged

    def visible(self, owner: str | None, result_owner: str | None) -> bool:
        """Whether a client ``owner`` may list and read a run ``result_owner`` made."""
        return self.share_runs or owner == result_owner

    def runs(self, owner: str | None = None) -> list[dict[str, Any]]:
        """The client's runs (every run with ``share_runs``), oldest first.

        Each: id, question (cut at :data:`~corrective_rag.cli.mcp_shapes.MAX_ECHO_CHARS`),
        stop reason, kept ids.
        """
        with self._lock:
            results = [r for who, r in self._runs.values() if self.visible(owner, who)]
        return [run_entry(r) for r in results]

    def run(self, run_id: str, owner: str | None = None) -> dict[str, Any]:
        """One run's whole record (the batch results' format), if the client may read it.

        Raises:
            InputError: no such run, or another client's (told apart from nothing).
        """
        from corrective_rag.runs.records.codec import to_dict

        with self._lock:
            who, result = self._runs.get(run_id, (None, None))
        if result is None or not self.visible(owner, who):
            raise InputError(f"no run {run_id!r} on this server (see {RUNS_URI})")
        record: dict[str, Any] = to_dict(result)
        return record

    def close(self) -> None:
        """Close the store and whatever the loop started."""
        with self._lock:
            stack, self._stack, self._orch = self._stack, None, None
        self.calls.close()
        if stack is not None:
            stack.close()


def check_question(question: object) -> str:
    """The question if usable: text, not blank, at most :data:`MAX_QUESTION_CHARS` characters.

    Raises:
        InputError: otherwise.
    """
    if isinstance(question, str) and len(question) > MAX_QUESTION_CHARS:
        raise InputError(
            f"question is {len(question):,} characters; at most {MAX_QUESTION_CHARS:,} are read"
        )
    return check_query(question, what="question")


def check_top_k(top_k: object) -> None:
    """Refuse a ``top_k`` that is not an int in 1..MAX_DOCUMENTS (None: the default).

    Raises:
        InputError: otherwise.
    """
    if top_k is not None and (
        not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_DOCUMENTS
    ):
        raise InputError(f"top_k must be between 1 and {MAX_DOCUMENTS}, got {top_k!r}")
