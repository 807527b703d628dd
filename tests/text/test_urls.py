"""``mask_url`` and ``url_secrets``: a URL's credentials never shown, everything else kept."""

from __future__ import annotations

import base64
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.text.urls import URL_LOGGED, URL_SHOWN, looks_like_key, mask_url, url_secrets

# Characters a user-info part or a parameter value may hold unescaped (RFC 3986 sub-delims and
# unreserved, less "&" and "=" that end a parameter); "'" and ";" are masked with the value.
_SAFE = string.ascii_letters + string.digits + "-._~!$()*+,;'"
_SECRET = st.text(_SAFE, min_size=8, max_size=30)


def test_user_and_password_are_masked_and_the_rest_kept():
    """The whole user-info part becomes *** and the host, port, path and query stay."""
    assert "http://***@gateway:8080/v1?model=m" == mask_url(
        "http://user:s3cr3tpw@gateway:8080/v1?model=m"
    )


def test_key_like_parameters_are_masked_where_they_appear():
    """api_key, access_token, sig and a token in the fragment are masked; model is kept."""
    url = "https://h/v1?api_key=K1&model=m&X-Amz-Signature=S2#access_token=T3"
    assert "https://h/v1?api_key=***&model=m&X-Amz-Signature=***#access_token=***" == mask_url(url)


def test_urls_inside_a_message_and_a_bare_query_are_masked():
    """A message quoting a URL, and requests' 'with url: /path?key=...', are masked in place."""
    text = "GET http://a:pw@h/v1/models failed; Max retries exceeded with url: /v1?key=K (x)"
    shown = "GET http://***@h/v1/models failed; Max retries exceeded with url: /v1?key=*** (x)"
    assert shown == mask_url(text)


def test_text_without_credentials_is_unchanged():
    """URLs without user-info or key-like parameters, e-mail addresses and '@' in paths stay."""
    for text in (
        "http://127.0.0.1:8080/v1",
        "https://h/p@x?q=1&page=2",
        "write to a@b.example",
        "no url here",
    ):
        assert text == mask_url(text)


@given(user=_SECRET, password=_SECRET, key=_SECRET, host=st.sampled_from(["h", "[::1]", "1.2.3.4"]))
def test_no_credential_survives_masking_and_masking_is_idempotent(user, password, key, host):
    """Whatever the user, password and key, none of them is left in the masked URL (nor the
    Basic token built from them), and masking twice changes nothing more."""
    url = f"http://{user}:{password}@{host}:9/v1?model=m&api_key={key}"
    shown = mask_url(url)
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    for secret in (user, password, key):
        assert secret not in shown
    assert shown == mask_url(shown)
    assert {user, password, key, basic} <= set(url_secrets(url))


def test_a_url_without_credentials_has_no_secrets():
    """Nothing to hide in a plain URL: url_secrets is empty."""
    assert () == url_secrets("http://127.0.0.1:8080/v1?model=m")


# -- issue 48 item 7: the gaps --------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://gw/sk-proj-Abc123def456ghi789/v1", "https://gw/***/v1"),
        ("https://gw/v1?jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "https://gw/v1?jwt=***"),
        ("https://gw/v1?k=opaque-value-1&model=m", "https://gw/v1?k=***&model=m"),
        ("https://gw/v1?x-goog-api-key=AIzaSyD-123&q=x", "https://gw/v1?x-goog-api-key=***&q=x"),
        ("https://gw/v1?api_key=ab'cd'ef&model=m", "https://gw/v1?api_key=***&model=m"),
        ("https://gw/v1?api_key=ab;cd;ef&model=m", "https://gw/v1?api_key=***&model=m"),
        ("https://gw/v1?a=1;api_key=K9;b=2", "https://gw/v1?a=1;api_key=***"),
        ("https://gw/v1?extra=sk-ant-api03-Zz9", "https://gw/v1?extra=***"),
    ],
    ids=["key-in-path", "jwt", "k", "x-goog-api-key", "quote", "semicolon", "after-;", "value"],
)
def test_each_gap_of_issue_48_is_masked(url: str, shown: str) -> None:
    """A key in the path, ``?jwt=``, ``?k=``, ``?x-goog-api-key=``, a value holding ``'`` or
    ``;``, a key after a ``;`` separator and a key by its value: each masked whole."""
    assert shown == mask_url(url)
    assert shown == mask_url(shown)
    hidden = url_secrets(url)
    assert hidden and all(secret not in shown for secret in hidden)


def test_a_search_url_keeps_its_question_when_shown_and_nothing_when_logged() -> None:
    """Shown to its user, a search URL keeps ``q=`` (their own question); logged, a URL loses
    its query and fragment whole, keys and all; both mask the user-info."""
    url = "https://u:pw@search.example/search?q=who+wrote+it&format=json&key=K1#t=T2"
    assert "https://***@search.example/search?q=who+wrote+it&format=json&key=***#t=T2" == mask_url(
        url, URL_SHOWN
    )
    assert "https://***@search.example/search" == mask_url(url, URL_LOGGED)
    message = f"page {url} skipped; again: {url}"
    assert "K1" not in mask_url(message, URL_LOGGED) and "who" not in mask_url(message, URL_LOGGED)


def test_names_that_are_not_keys_stay() -> None:
    """Model names, UUIDs and file names in a path are not taken for keys."""
    for value in (
        "Meta-Llama-3.1-70B-Instruct-Turbo",
        "550e8400-e29b-41d4-a716-446655440000",
        "gpt-4o-mini-2024-07-18",
        "chat",
        "sk-",
        "v1",
    ):
        assert not looks_like_key(value), value
    url = "https://gw/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions?api-version=2"
    assert url == mask_url(url)


def test_a_file_path_in_a_message_is_no_url_and_keeps_its_folders() -> None:
    """A folder whose name is a long run of letters and digits is masked in a URL's path only:
    a file path beside a URL, as judge-check prints its profile's, is shown as it is."""
    folder = "test_plain_check_grades_the_ju0"
    text = f"judge at https://gw/{folder}/v1 (profile /tmp/{folder}/profile.json)"
    assert f"judge at https://gw/***/v1 (profile /tmp/{folder}/profile.json)" == mask_url(text)
