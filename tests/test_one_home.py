"""One home per mechanism, found by behaviour: no second text cutter, URL masker or top_k bound.

Names do not give a second definition away (``_cut``, ``clip``, ``shorten``, ``shown_url``
each cut or masked in their own way), so each mechanism is found by what it does. Every
module-level function of the package whose signature fits is imported and called with probes;
one that behaves as the mechanism must give exactly what the home gives under one of its named
policies, and get there by calling the home (a delegate, such as ``text.display.cut``, which
escapes a line and then cuts it with ``CUT_LINE``); else it is a second definition (a cut of its
own, or a copy of a policy) and the test names it.

* A cutter takes ``(text, limit)`` and returns a text: a short text whole, a long one shortened
  to a start of it. Its home is :func:`corrective_rag.errors.cut_text`.
* A URL masker takes a text and returns it with a URL's password and key gone and its host
  kept (``web.results.canonical_url``, which drops the user-info but keeps the query, is a
  normaliser, not a masker). Its home is :func:`corrective_rag.text.urls.mask_url`.
* A ``top_k`` bound: every entry taking a ``top_k`` of hits (the loop's, a store search's,
  ``candidate_limit``, a store's ``candidates``) accepts ``MAX_TOP_K`` and refuses one more,
  and one module defines a ``*TOP_K*`` constant.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import corrective_rag
from corrective_rag.errors import (
    CUT_BARE,
    CUT_LINE,
    CUT_MESSAGE,
    CUT_SPAN,
    CUT_STORED,
    ConfigError,
    CorrectiveRAGError,
    cut_text,
)
from corrective_rag.text.urls import URL_LOGGED, URL_SHOWN, mask_url

PACKAGE = Path(corrective_rag.__file__).resolve().parent
CUT_POLICIES = (CUT_STORED, CUT_SPAN, CUT_BARE, CUT_LINE, CUT_MESSAGE)
URL_POLICIES = (URL_SHOWN, URL_LOGGED)
TEXTISH = {None, "str", "object", "Any"}
HOME_CUT = "corrective_rag.errors.cut_text"
HOME_MASK = "corrective_rag.text.urls.mask_url"


def _functions() -> Iterator[tuple[str, ast.FunctionDef]]:
    """Every module-level function of the package, with its module's name."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                yield module, node


def _annotation(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node).strip("'\"")


def _takes(node: ast.FunctionDef, *kinds: set[str | None]) -> bool:
    """Whether ``node`` can be called with one positional argument per kind (others defaulted)."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    required = len(positional) - len(args.defaults)
    if len(positional) < len(kinds) or required > len(kinds):
        return False
    if any(d is None for d in args.kw_defaults):  # a keyword-only argument without default
        return False
    return all(
        _annotation(a.annotation) in kind for a, kind in zip(positional, kinds, strict=False)
    )


def _returns_text(node: ast.FunctionDef) -> bool:
    returned = _annotation(node.returns)
    return returned is not None and returned.split("[")[0] in {"str", "tuple"} and "str" in returned


def _calls(name: str, homes: set[str]) -> bool:
    """Whether the function ``module.function`` calls one of ``homes`` (by its last name)."""
    module, _, function = name.rpartition(".")
    for found_module, node in _functions():
        if f"{found_module}.{node.name}" == f"{module}.{function}":
            called = {
                getattr(c.func, "id", None) or getattr(c.func, "attr", None)
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
            }
            return bool(called & homes)
    return False


def _candidates(*kinds: set[str | None]) -> list[tuple[str, Callable[..., Any]]]:
    """The functions whose signature fits, imported; a module that cannot be imported for a
    missing optional dependency is skipped, any other import failure fails the test."""
    found = []
    for module, node in _functions():
        if not (_takes(node, *kinds) and _returns_text(node)):
            continue
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("corrective_rag"):
                raise
            continue
        found.append((f"{module}.{node.name}", getattr(loaded, node.name)))
    return found


def _text(value: Any) -> Any:
    """A function's text: itself, or the first item of a ``(text, flag)`` pair."""
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        return value[0]
    return value


def _call(function: Callable[..., Any], *args: Any) -> Any:
    try:
        return _text(function(*args))
    except (CorrectiveRAGError, ValueError, TypeError, AttributeError, KeyError, OSError):
        return None


# -- cutting text -----------------------------------------------------------------------------

LONG = "abcdefghij" * 100
CUT_PROBES = [(LONG, 40), (LONG, 5), (LONG, 0), ("abc", 50), (LONG, 2000), ("x" * 101, 26)]


def _is_cutter(function: Callable[..., Any]) -> bool:
    short, long = _call(function, "abc", 50), _call(function, LONG, 40)
    return short == "abc" and isinstance(long, str) and long[:5] == LONG[:5] and long != LONG


def _cut_like_home(function: Callable[..., Any]) -> bool:
    return any(
        all(_call(function, t, n) == cut_text(t, n, policy) for t, n in CUT_PROBES)
        for policy in CUT_POLICIES
    )


def test_the_probes_tell_a_cutter_from_the_home() -> None:
    """The probes see the old cutters for what they were: each cuts, none as a policy does."""
    old = {
        "errors.shorten": lambda t, n=500: t if len(t) <= n else f"{t[:n]}... [{len(t) - n} more]",
        "mcp_server._cut": lambda t, n: (t, False) if len(t) <= n else (t[:n], True),
        "tracing._cut": lambda t, n: (
            t if len(t) <= n else t[: max(0, n - 21)] + f"…[cut: {len(t)} chars]"
        ),
    }
    for name, function in old.items():
        assert _is_cutter(function), name
        if name != "mcp_server._cut":  # a hard cut is CUT_BARE's: a delegate of the home
            assert not _cut_like_home(function), name
    assert not _is_cutter(str.upper)


def test_every_function_that_cuts_text_cuts_as_the_home_does() -> None:
    """Every ``(text, limit) -> text`` function that cuts is ``errors.cut_text`` under a policy."""
    cutters = [(n, f) for n, f in _candidates(TEXTISH, {"int"}) if _is_cutter(f)]
    assert HOME_CUT in [n for n, _ in cutters]
    second = [name for name, function in cutters if not _cut_like_home(function)]
    assert [] == second, f"cut text unlike errors.cut_text's policies: {second}"
    # one that cuts as a policy does must get there through the home: a copy is a second home
    copies = [n for n, _ in cutters if n != HOME_CUT and not _calls(n, {"cut_text"})]
    assert [] == copies, f"cut text as errors.cut_text does without calling it: {copies}"


# -- masking URLs -----------------------------------------------------------------------------

URL = "http://user:S3cretPw@gw.example:8/sk-proj-AAAA1111bbbb2222/v1?q=who&api_key=K3yK3yK3y"
URL_PROBES = [URL, f"GET {URL} failed (with url: /v1?token=T0123456789)", "no url here"]


def _is_masker(function: Callable[..., Any]) -> bool:
    shown = _call(function, URL)
    if not isinstance(shown, str) or "gw.example" not in shown:
        return False
    return not any(secret in shown.lower() for secret in ("s3cretpw", "k3yk3yk3y"))


def _masks_like_home(function: Callable[..., Any]) -> bool:
    return any(
        all(_call(function, text) == mask_url(text, policy) for text in URL_PROBES)
        for policy in URL_POLICIES
    )


def test_the_probes_tell_a_masker_from_the_home() -> None:
    """The old ``web.http.shown_url`` (query dropped, user-info dropped) was a second masker."""
    from urllib.parse import urlsplit, urlunsplit

    def shown_url(url: str) -> str:
        parts = urlsplit(url)
        host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname or ""
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    assert _is_masker(shown_url) and not _masks_like_home(shown_url)
    assert _is_masker(mask_url) and not _is_masker(str.lower)


def test_every_function_that_masks_a_url_masks_as_the_home_does() -> None:
    """Every ``(text) -> text`` function that hides a URL's password is ``mask_url`` under a
    policy."""
    maskers = [(n, f) for n, f in _candidates(TEXTISH) if _is_masker(f)]
    assert HOME_MASK in [n for n, _ in maskers]
    second = [name for name, function in maskers if not _masks_like_home(function)]
    assert [] == second, f"mask URLs unlike text.urls.mask_url's policies: {second}"
    copies = [n for n, _ in maskers if n != HOME_MASK and not _calls(n, {"mask_url"})]
    assert [] == copies, f"mask URLs as text.urls.mask_url does without calling it: {copies}"


# -- the top_k bound --------------------------------------------------------------------------


def _bound(accepts: Callable[[int], object]) -> tuple[bool, bool]:
    """Whether ``accepts`` takes MAX_TOP_K, and whether it refuses MAX_TOP_K + 1."""
    from corrective_rag.store.checks import MAX_TOP_K

    def ok(value: int) -> bool:
        try:
            accepts(value)
        except ConfigError:
            return False
        return True

    return ok(MAX_TOP_K), not ok(MAX_TOP_K + 1)


def test_every_top_k_of_hits_has_one_bound() -> None:
    """The loop's top_k (constructor and run), its candidate_limit, a store search's top_k and
    a store's candidates accept MAX_TOP_K and refuse one more: one bound, one meaning."""
    from corrective_rag import CorrectiveRAGOrchestrator, HybridStore
    from corrective_rag.testing import ListRetriever, ScriptedEvaluator, ScriptedRewriter
    from corrective_rag.testing.filter_contract import LetterEmbedder
    from corrective_rag.types import Document

    docs = [Document("a", "alpha"), Document("b", "beta")]

    def loop(**kwargs: Any) -> CorrectiveRAGOrchestrator:
        return CorrectiveRAGOrchestrator(
            ListRetriever(docs), ScriptedEvaluator({}), ScriptedRewriter([]), **kwargs
        )

    from corrective_rag.store.checks import MAX_TOP_K

    wide = loop(candidate_limit=MAX_TOP_K)
    store = HybridStore.in_memory(embedder=LetterEmbedder())
    store.add(docs)
    try:
        entries: dict[str, Callable[[int], object]] = {
            "orchestrator top_k": lambda k: loop(top_k=k, candidate_limit=k),
            "orchestrator candidate_limit": lambda k: loop(candidate_limit=k),
            "run top_k": lambda k: wide.run("alpha", top_k=k),
            "store retrieve top_k": lambda k: store.retrieve("alpha", top_k=k),
            "store candidates": lambda k: HybridStore.in_memory(
                embedder=LetterEmbedder(), candidates=k
            ).close(),
        }
        bounds = {name: _bound(accepts) for name, accepts in entries.items()}
    finally:
        store.close()
    assert {name: (True, True) for name in entries} == bounds


def test_one_module_defines_a_top_k_bound() -> None:
    """No second ``MAX_TOP_K``-like constant: one number named ``*TOP_K*`` in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or not (
                isinstance(node.value, ast.Constant) and type(node.value.value) is int
            ):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            found += [f"{path.relative_to(PACKAGE)}:{n}" for n in names if "TOP_K" in n.upper()]
    assert ["store/checks.py:MAX_TOP_K"] == found


def test_candidates_are_called_not_assumed() -> None:
    """The scan finds the homes themselves, so an import or signature slip cannot empty it."""
    names = [name for name, _ in _candidates(TEXTISH, {"int"})]
    assert "corrective_rag.errors.cut_text" in names
    assert inspect.isfunction(dict(_candidates(TEXTISH))["corrective_rag.text.urls.mask_url"])
