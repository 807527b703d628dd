"""Keep the credentials a URL may carry out of every message, log field, span and file.

A gateway URL can hold a password (``http://user:password@gateway/v1``) or a key in its query
string (``?api_key=...``, a signed URL's ``sig=...``). :func:`mask_url` masks both wherever a URL
appears in a text: the whole user-info part becomes :data:`~corrective_rag.text.secrets.MASK`,
and so does the value of every query (or fragment) parameter whose name looks like a credential
(:data:`KEYLIKE`). Query parameters are masked even outside a full URL, because ``requests``
quotes a request's path and query alone (``Max retries exceeded with url: /v1?key=...``).
:func:`url_secrets` lists what the URL carries, for :func:`~corrective_rag.text.secrets.redact`
to hide anywhere else (a server echoing the ``Authorization: Basic`` header it was sent).

Pure functions over strings; they never raise on a malformed URL.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote

from corrective_rag.text.secrets import MASK

__all__ = ["KEYLIKE", "mask_url", "url_secrets"]

# Parameter names that carry credentials: api_key, access_token, client_secret, password,
# X-Amz-Signature, sig (Azure SAS), auth, code (OAuth), session ids. Matched anywhere in the
# name: masking a harmless value costs less than showing a key.
KEYLIKE = re.compile(
    r"key|token|secret|pass|pwd|sig|auth|credential|session|cookie|bearer|code", re.IGNORECASE
)
# scheme://USERINFO@ : user-info ends at the last "@" before the path, query or fragment.
_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@"
)
# ?name=value, &name=value, ;name=value or #name=value (OAuth puts tokens in the fragment). A
# value ends at a separator, a space, a quote or an angle bracket (a URL quoted in a repr or in
# HTML); a closing bracket is masked with it, since keys may hold one.
_PARAM = re.compile(r"(?P<lead>[?&;#](?P<name>[^=&;#?\s]+)=)(?P<value>[^&;#\s'\"<>]*)")


def mask_url(text: str) -> str:
    """``text`` with the credentials of every URL in it masked; a URL alone or in a message.

    ``http://user:pw@host/v1?api_key=k&model=m`` becomes ``http://***@host/v1?api_key=***&model=m``.
    Text without a URL is returned unchanged.
    """
    if not isinstance(text, str):
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _PARAM.sub(_mask_param, text)


def url_secrets(url: str) -> tuple[str, ...]:
    """What ``url`` carries that must not be shown, for :func:`~corrective_rag.text.secrets.redact`.

    Its user-info (whole, user, password and the ``Basic`` token built from them) and its
    key-like parameters' values, as given and decoded. Empty for a URL without credentials.
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
    for param in _PARAM.finditer(url):
        if param["value"] and KEYLIKE.search(unquote(param["name"])):
            found += [param["value"], unquote(param["value"])]
    return tuple(dict.fromkeys(s for s in found if s))


def _mask_param(match: re.Match[str]) -> str:
    if not match["value"] or not KEYLIKE.search(unquote(match["name"])):
        return match[0]
    return match["lead"] + MASK
