"""The pipeline flags of ``run``, ``batch`` and ``index``, checked together into ``Options``.

Flags that only make sense together (a URL and a model, a cap and the stop rule it allows, a
web search and its key) are checked here, before anything is opened, so that a mistake costs
one line and no model load.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from corrective_rag.errors import ConfigError

__all__ = ["judge_profile", "options"]


def options(args: argparse.Namespace, *, judged: bool = True) -> Any:
    """The ``Options`` the parsed flags name; keys come from the environment only.

    ``judged``: resolve the judge to run (:func:`judge_profile`); ``index``, which runs no
    loop, reads no judge profile.

    Raises:
        ConfigError: flags that contradict each other or miss their partner.
    """
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
    if args.store and args.chroma_host:
        raise ConfigError("give either --store DIR or --chroma-host HOST, not both")
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
        min_relevant=_min_relevant(args, llm=url is not None or bool(args.local_llm)),
        judge_cap=args.judge_cap,
        **_fallback_options(args),
        timeout=args.timeout,
        max_retries=args.max_retries,
        qdrant=args.qdrant,
        qdrant_api_key=os.environ.get("QDRANT_API_KEY") or None,
        judge=judge_profile(args, model=_model_key(model, args.local_llm)) if judged else None,
    )


def _model_key(model: str | None, local_llm: str | None) -> str | None:
    """The model a judge profile is kept under: ``--model``, else the GGUF file's name."""
    if model is not None:
        return model
    if local_llm:
        from corrective_rag.cli.wiring import local_model

        return local_model(local_llm)
    return None


def judge_profile(args: argparse.Namespace, *, model: str | None) -> Any:
    """The judge a command runs: ``--judge`` / the profile file's choice for ``model``, or None.

    ``model`` is None without an LLM: then the profile file's ``offline`` entries are read (a
    judge checked with ``judge-check --judges offline,...``). The file is the one named by
    ``--calibration`` (then it must hold an entry), else the default location, read only if it
    is there. A profile measured for another model, prompt or call shape is refused with one
    line; one measured under another policy is used, with a warning.

    Raises:
        ConfigError: the file cannot be read, holds nothing for ``model`` (when named), or its
            profile does not fit this run; ``--judge`` names a judge that needs an LLM and
            there is none.
    """
    from corrective_rag.cli.environment import calibration_path
    from corrective_rag.evaluate.kinds import judge_kind
    from corrective_rag.evaluate.profile import JudgeProfile

    kind = getattr(args, "judge", None)
    given = getattr(args, "calibration", None)
    if kind is not None and model is None and judge_kind(kind).needs_chat:
        raise ConfigError(f"--judge {kind} needs an LLM (--llm-url or --local-llm)")
    key = model if model is not None else "offline"
    path = calibration_path(given)
    profile = JudgeProfile.read(path, model=key, kind=kind, required=given is not None)
    if profile is None and kind is not None:
        profile = JudgeProfile.of(kind, model=key)
    if profile is None:
        return None
    if model is None and judge_kind(profile.kind).needs_chat:
        raise ConfigError(f"{path}: the judge chosen offline is {profile.kind}, which needs an LLM")
    profile.check(model=key, call_mode="one-call")
    if profile.policy != args.policy:
        from corrective_rag.observe.logs import get_logger

        get_logger(__name__).warning(
            "judge_profile_policy_differs",
            measured=profile.policy,
            run=args.policy,
            hint="its figures were measured under another policy: judge-check --policy",
        )
    return profile


def _min_relevant(args: argparse.Namespace, *, llm: bool) -> int | None:
    """``--min-relevant``, checked against ``--judge-cap``, which only the offline judge takes.

    Refused here, before a model loads; without ``--min-relevant`` the orchestrator lowers the
    policy's number to the cap (``loop.stopping.within_cap``).
    """
    cap = args.judge_cap
    if cap is None:
        return args.min_relevant
    if llm:
        raise ConfigError("--judge-cap holds the offline judge; with an LLM the model judges")
    if args.min_relevant is not None and args.min_relevant > cap:
        raise ConfigError(
            f"--min-relevant {args.min_relevant} cannot be reached when the judge keeps "
            f"at most {cap} (--judge-cap {cap})"
        )
    return args.min_relevant


_KEY_VARIABLES = {"tavily": "TAVILY_API_KEY", "brave": "BRAVE_API_KEY"}


def _fallback_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fallback flags checked together; web-search keys come from the environment only."""
    from corrective_rag.cli.environment import secrets

    name = getattr(args, "fallback", None)
    url = getattr(args, "fallback_url", None)
    store = getattr(args, "fallback_store", None)
    fetch = bool(getattr(args, "fetch_pages", False))
    private = bool(getattr(args, "fetch_private", False))
    if name and store:
        raise ConfigError("give either --fallback or --fallback-store, not both")
    if url and not name:
        raise ConfigError("--fallback-url needs --fallback searxng|tavily|brave")
    if fetch and not name:
        raise ConfigError("--fetch-pages needs a web --fallback")
    if private and not fetch:
        raise ConfigError("--fetch-private needs --fetch-pages")
    if name == "searxng" and not url:
        raise ConfigError("--fallback searxng needs --fallback-url URL (your SearxNG instance)")
    key = None
    if name in _KEY_VARIABLES:
        key = os.environ.get(_KEY_VARIABLES[name]) or None
        if key is None:
            raise ConfigError(f"--fallback {name} needs {_KEY_VARIABLES[name]} in the environment")
    return {
        "fallback": name,
        "fallback_url": url,
        "fallback_store": store,
        "fallback_key": key,
        "fetch_pages": fetch,
        "fetch_private": private,
        "web_secrets": secrets() if name else (),
    }
