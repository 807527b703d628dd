"""Keep the credentials a URL may carry out of every message, log field, span and file.

The one home for masking a URL: every place the package shows, logs or records a URL, or a
message quoting one, calls :func:`mask_url` with one of two named policies:

* :data:`URL_SHOWN`, a URL shown to the user who gave it (an error line, ``judge-check``'s
  header, an exception message): it stays recognisable, so the query is kept (a search URL's
  ``q=`` is the user's own question) and only what looks like a credential is masked.
* :data:`URL_LOGGED`, a URL of someone else's making written to a log field or a span (a page a
  search result linked to): its query string and fragment are dropped whole, since a credential
  may ride there under any name.

What is masked under both, as :data:`~corrective_rag.text.secrets.MASK`:

* the whole user-info part (``http://user:password@gateway/v1``);
* the value of every query (or fragment) parameter whose name looks like a credential
  (:data:`KEYLIKE`: ``api_key``, ``x-goog-api-key``, ``access_token``, ``jwt``, ``k``,
  ``sig``...) or whose value does (:func:`looks_like_key`: ``sk-...``, ``AIza...``, a JWT). A
  masked value runs to the next ``&``, ``#`` or to a character a URL cannot hold raw
  (whitespace, ``"``, ``<``, ``>``): a ``'`` or ``;`` inside a key is masked with it;
* a path segment that looks like a key (``https://gateway/sk-.../v1``).

Query parameters and path segments are masked even outside a full URL, because ``requests``
quotes a request's path and query alone (``Max retries exceeded with url: /v1?key=...``).
:func:`url_secrets` lists what the URL carries, for :func:`~corrective_rag.text.secrets.redact`
to hide anywhere else (a server echoing the ``Authorization: Basic`` header it was sent).

Pure functions over strings; they never raise on a malformed URL.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from urllib.parse import unquote

from corrective_rag.text.secrets import MASK

__all__ = [
    "KEYLIKE",
    "URL_LOGGED",
    "URL_SHOWN",
    "UrlPolicy",
    "looks_like_key",
    "mask_url",
    "url_secrets",
]


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    """How :func:`mask_url` shows a URL: :data:`URL_SHOWN` or :data:`URL_LOGGED`.

    Attributes:
        keep_query: keep the query string and fragment (their credentials masked); ``False``
            drops both from every full URL.
    """

    keep_query: bool


URL_SHOWN = UrlPolicy(keep_query=True)
URL_LOGGED = UrlPolicy(keep_query=False)

# Parameter names that carry credentials: api_key, x-goog-api-key, access_token, client_secret,
# password, X-Amz-Signature, sig (Azure SAS), auth, code (OAuth), session ids, a JWT, and the
# bare "k" some gateways take. Matched anywhere in the name (but "k" whole): masking a harmless
# value costs less than showing a key.
KEYLIKE = re.compile(
    r"key|token|secret|pass|pwd|sig|auth|credential|session|cookie|bearer|code|jwt|hmac|^k$",
    re.IGNORECASE,
)
# Values that are keys whatever they are called: the prefixes providers give their keys
# (OpenAI/Anthropic sk-, Stripe sk_/pk_/rk_, GitHub, GitLab, Slack, Hugging Face, AWS, Google,
# Groq, Tavily, NVIDIA, Replicate, Perplexity) and a JWT (base64 of '{"', three parts).
_KEY_PREFIX = re.compile(
    r"(?:sk|pk|rk)[-_]|gh[pousr]_|github_pat_|glpat-|xox[abpors]-|hf_|AKIA|ASIA|AIza|ya29\."
    r"|gsk_|tvly-|nvapi-|r8_|pplx-|eyJ[A-Za-z0-9_-]+\.",
)
_MIN_PREFIXED = 10  # "sk-" alone, or "pk_test", is a word, not a key
_OPAQUE_RUN = 24  # letters, digits and "_" in one run, mixed: a token, not a model or file name
_RUN = re.compile(r"[A-Za-z0-9_]+")

# scheme://USERINFO@ : user-info ends at the last "@" before the path, query or fragment.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@"
)
# A whole URL, to the first character a URL cannot hold raw.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"<>]*")
# ?name=value, &name=value, ;name=value or #name=value (OAuth puts tokens in the fragment). A
# value ends at "&", "#" or a character a URL cannot hold raw; "'" and ";" are allowed in URLs,
# so a key holding one is masked whole (a URL quoted in a repr loses its closing quote).
_PARAM = re.compile(r"(?P<lead>[?&;#](?P<name>[^=&;#?\s]+)=)(?P<value>[^&#\s\"<>]*)")
# A path segment: what follows a "/" up to the next "/", query, fragment or the URL's end.
_SEGMENT = re.compile(r"(?<=/)[^/?#&\s\"<>']+")


def looks_like_key(value: str) -> bool:
    """Whether ``value`` reads as a credential whatever it is called.

    A provider's key prefix (``sk-``, ``AIza``, ``ghp_``, a JWT's ``eyJ...``) on at least
    :data:`_MIN_PREFIXED` characters, or a run of at least 24 letters, digits and ``_`` that
    mixes letters and digits (a model name, a UUID or a file name breaks into shorter runs).
    """
    if len(value) >= _MIN_PREFIXED and _KEY_PREFIX.match(value):
        return True
    return any(
        len(run) >= _OPAQUE_RUN and any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
        for run in _RUN.findall(value)
    )


def mask_url(text: str, policy: UrlPolicy = URL_SHOWN) -> str:
    """``text`` with the credentials of every URL in it masked; a URL alone or in a message.

    ``http://user:pw@host/v1?api_key=k&model=m`` becomes ``http://***@host/v1?api_key=***&model=m``
    (:data:`URL_SHOWN`) or ``http://***@host/v1`` (:data:`URL_LOGGED`). Text without a URL or
    anything key-like is returned unchanged.
    """
    if not isinstance(text, str):
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    if not policy.keep_query:
        text = _URL.sub(lambda m: re.split(r"[?#]", m[0], maxsplit=1)[0], text)
    text = _URL.sub(lambda m: _SEGMENT.sub(_masked_segment, m[0]), text)  # in URLs, not paths
    return _PARAM.sub(_mask_param, text)


def _masked_segment(segment: re.Match[str]) -> str:
    return MASK if looks_like_key(unquote(segment[0])) else segment[0]


def url_secrets(url: str) -> tuple[str, ...]:
    """What ``url`` carries that must not be shown, for :func:`~corrective_rag.text.secrets.redact`.

    Its user-info (whole, user, password and the ``Basic`` token built from them), its
    key-like parameters' values and key-like path segments, as given and decoded. Empty for a
    URL without credentials.
    """
    if not isinstance(url, str):
        return ()
    found: list[str] = []
    match = _USERINFO.search(url)
    if match and match["userinfo"]:
        info = match["userinfo"]
        user, _, password = info.partition(":")
        plain = f"{unquote(user)}:{unquote(password)}"
        found += [info, user, password, unquote(user), unquote(password), plain]
        found.append(base64.b64encode(plain.encode()).decode())
    for value in _secret_values(url):
        found += [value, unquote(value)]
    for segment in _SEGMENT.finditer(url):
        if looks_like_key(unquote(segment[0])):
            found += [segment[0], unquote(segment[0])]
    return tuple(dict.fromkeys(s for s in found if s))


def _secret(name: str, value: str) -> bool:
    """A parameter whose value is masked: a key-like name, or a value that reads as a key."""
    head = value.partition(";")[0]
    return bool(value) and (bool(KEYLIKE.search(unquote(name))) or looks_like_key(unquote(head)))


def _mask_param(match: re.Match[str]) -> str:
    value = match["value"]
    if value != MASK and _secret(match["name"], value):
        return match["lead"] + MASK
    # ";" may separate parameters too: what follows it in a harmless value is read again
    head, sep, rest = value.partition(";")
    return match["lead"] + head + (_PARAM.sub(_mask_param, sep + rest) if sep else "")


def _secret_values(text: str) -> list[str]:
    """The values :func:`mask_url` masks in ``text``'s parameters, in order."""
    found = []
    for match in _PARAM.finditer(text):
        value = match["value"]
        if _secret(match["name"], value):
            found.append(value)
        elif ";" in value:
            found += _secret_values(value[value.index(";") :])
    return found
