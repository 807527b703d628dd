"""The question-document pairs a judge is checked on: known answers from the demo's corpus.

Each document is a chunk of a standard-library docstring, written as ``corrective-rag demo``
indexes it (``module.object: text``), and each question is phrased as a person asks it. Every
question has one or two documents that answer it, one *near miss* (same module or same words,
but it does not answer: decoding when the question asks to encode, the temp folder's name when
it asks for a file) and one or two that are plainly off topic. A judge that reads the words and
not the meaning calls the near misses relevant; one that calls everything relevant agrees on
about a third of the pairs; one that calls nothing relevant on under 0.7.
"""

from __future__ import annotations

from dataclasses import dataclass

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import read_bounded_lines
from corrective_rag.inputs.files import loads_bounded
from corrective_rag.types import Document

__all__ = ["CHECK_PAIRS", "CheckPair", "read_pairs"]


@dataclass(frozen=True, slots=True)
class CheckPair:
    """One question, one document, and whether the document answers the question.

    Attributes:
        question: the question, as a user asks it.
        document: the document to judge (its id is unique across :data:`CHECK_PAIRS`).
        relevant: the known answer.
        near_miss: an irrelevant document that shares the question's topic or words.
    """

    question: str
    document: Document
    relevant: bool
    near_miss: bool = False


def _doc(qualname: str, text: str) -> Document:
    module = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
    return Document(f"{qualname}#0", f"{qualname}: {text}", {"module": module})


_SHELL = "How do I run a shell command and capture its output?"
_TEMPFILE = "How do I create a temporary file?"
_TIMING = "How do I measure the execution time of a small code snippet?"
_BASE64 = "How do I encode binary data as base64 text?"
_JSON = "How do I turn a JSON string into Python objects?"
_HASH = "How do I compute the SHA-256 digest of some bytes?"
_GLOB = "How do I find the files whose names match a wildcard pattern like *.txt?"
_LARGEST = "How do I get the n largest items of a list?"

CHECK_PAIRS: tuple[CheckPair, ...] = (
    CheckPair(
        _SHELL,
        _doc(
            "subprocess.run",
            "Run command with arguments and return a CompletedProcess instance. The "
            "returned instance will have attributes args, returncode, stdout and stderr. "
            "By default, stdout and stderr are not captured, and those attributes will be"
            " None. Pass stdout=PIPE and/or stderr=PIPE in order to capture them, or pass"
            " capture_output=True to capture both.",
        ),
        True,
    ),
    CheckPair(
        _SHELL,
        _doc(
            "subprocess.check_output",
            "Run command with arguments and return its output. If the exit code was "
            "non-zero it raises a CalledProcessError. The CalledProcessError object will "
            "have the return code in the returncode attribute and output in the output "
            "attribute.",
        ),
        True,
    ),
    CheckPair(
        _SHELL,
        _doc(
            "shlex.split",
            "Split the string s using shell-like syntax, as a shell would split a command"
            " line into its words, honouring quotes and escapes.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _SHELL,
        _doc(
            "zlib.compress",
            "Returns a bytes object containing compressed data. data: binary data to be "
            "compressed. level: compression level, in 0-9 or -1. wbits: the window buffer"
            " size and container format.",
        ),
        False,
    ),
    CheckPair(
        _TEMPFILE,
        _doc(
            "tempfile.NamedTemporaryFile",
            "Create and return a temporary file. Arguments: 'prefix', 'suffix', 'dir' -- "
            "as for mkstemp. 'mode' -- the mode argument to io.open (default \"w+b\"). "
            "'delete' -- whether the file is deleted on close (default True). The file is"
            " created as mkstemp() would do it.",
        ),
        True,
    ),
    CheckPair(
        _TEMPFILE,
        _doc(
            "tempfile.mkstemp",
            "User-callable function to create and return a unique temporary file. The "
            "return value is a pair (fd, name) where fd is the file descriptor returned "
            "by os.open, and name is the filename.",
        ),
        True,
    ),
    CheckPair(
        _TEMPFILE,
        _doc(
            "tempfile.gettempdir",
            "Returns tempfile.tempdir as str: the name of the directory used for "
            "temporary files, found from the TMPDIR, TEMP and TMP environment variables.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _TEMPFILE,
        _doc(
            "calendar.isleap",
            "Return True for leap years, False for non-leap years.",
        ),
        False,
    ),
    CheckPair(
        _TIMING,
        _doc(
            "timeit",
            "Tool for measuring execution time of small code snippets. This module avoids"
            " a number of common traps for measuring execution times. Library usage: see "
            "the Timer class. Command line usage: python -m timeit [-n N] [-r N] [-s S] "
            "[statement].",
        ),
        True,
    ),
    CheckPair(
        _TIMING,
        _doc(
            "sched",
            "A generally useful event scheduler class. Each instance is parametrized with"
            " two functions, one that is supposed to return the current time, one that is"
            " supposed to implement a delay. Events are scheduled to run at a given time.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _TIMING,
        _doc(
            "textwrap.wrap",
            "Wrap a single paragraph of text, returning a list of wrapped lines. Reformat"
            " the single paragraph in 'text' so it fits in lines of no more than 'width' "
            "columns.",
        ),
        False,
    ),
    CheckPair(
        _BASE64,
        _doc(
            "base64.b64encode",
            "Encode the bytes-like object s using Base64 and return a bytes object. "
            "Optional altchars should be a byte string of length 2 which specifies an "
            "alternative alphabet for the '+' and '/' characters.",
        ),
        True,
    ),
    CheckPair(
        _BASE64,
        _doc(
            "base64.b64decode",
            "Decode the Base64 encoded bytes-like object or ASCII string s. The result is"
            " returned as a bytes object. A binascii.Error is raised if s is incorrectly "
            "padded.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _BASE64,
        _doc(
            "heapq.heappush",
            "Push item onto heap, maintaining the heap invariant.",
        ),
        False,
    ),
    CheckPair(
        _JSON,
        _doc(
            "json.loads",
            "Deserialize s (a str, bytes or bytearray instance containing a JSON "
            "document) to a Python object. object_hook is an optional function that will "
            "be called with the result of any object literal decode (a dict).",
        ),
        True,
    ),
    CheckPair(
        _JSON,
        _doc(
            "json.dumps",
            "Serialize obj to a JSON formatted str. If skipkeys is true then dict keys "
            "that are not basic types will be skipped instead of raising a TypeError. If "
            "ensure_ascii is false, the return value can contain non-ASCII characters.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _JSON,
        _doc(
            "smtplib.SMTP.sendmail",
            "This command performs an entire mail transaction. The arguments are: "
            "from_addr, the address sending this mail; to_addrs, a list of addresses to "
            "send this mail to; msg, the message to send.",
        ),
        False,
    ),
    CheckPair(
        _HASH,
        _doc(
            "hashlib",
            "A common interface to many hash functions. new(name, data=b'') returns a new"
            " hash object implementing the given hash function. Named constructor "
            "functions are also available: md5(), sha1(), sha256(), sha512(), blake2b(). "
            "hashlib.sha256(data).hexdigest() returns the digest as hex.",
        ),
        True,
    ),
    CheckPair(
        _HASH,
        _doc(
            "hmac.compare_digest",
            "Return 'a == b'. This function uses an approach designed to prevent timing "
            "analysis, making it appropriate for cryptography. a and b must both be of "
            "the same type: either str (ASCII only), or any bytes-like object.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _HASH,
        _doc(
            "calendar.month",
            "Return a month's calendar as a multi-line string, the week days as columns "
            "and the weeks as rows.",
        ),
        False,
    ),
    CheckPair(
        _GLOB,
        _doc(
            "glob.glob",
            "Return a list of paths matching a pathname pattern. The pattern may contain "
            "simple shell-style wildcards a la fnmatch. If recursive is true, the pattern"
            " '**' will match any files and zero or more directories and subdirectories.",
        ),
        True,
    ),
    CheckPair(
        _GLOB,
        _doc(
            "glob.escape",
            "Escape all special characters, so that a path holding '*', '?' or '[' is "
            "matched literally.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _GLOB,
        _doc(
            "statistics.median",
            "Return the median (middle value) of numeric data. When the number of data "
            "points is odd, return the middle data point; when it is even, the mean of "
            "the two middle values.",
        ),
        False,
    ),
    CheckPair(
        _LARGEST,
        _doc(
            "heapq.nlargest",
            "Find the n largest elements in a dataset. Equivalent to: sorted(iterable, "
            "key=key, reverse=True)[:n].",
        ),
        True,
    ),
    CheckPair(
        _LARGEST,
        _doc(
            "heapq.heapify",
            "Transform list into a heap, in-place, in linear time; the smallest item is "
            "then at index 0.",
        ),
        False,
        near_miss=True,
    ),
    CheckPair(
        _LARGEST,
        _doc(
            "getpass.getpass",
            "Prompt for a password, with echo turned off. The prompt is written on the "
            "tty, or on stderr if there is none.",
        ),
        False,
    ),
    CheckPair(
        _LARGEST,
        _doc(
            "mimetypes.guess_type",
            "Guess the type of a file based on its URL or filename. Return value is a "
            "tuple (type, encoding) where type is None if the type can't be guessed.",
        ),
        False,
    ),
)


_MOST_PAIRS = 100_000  # a labelled file larger than this is no judge check
_MOST_LINE_BYTES = 1_000_000
_MOST_BYTES = 200_000_000  # 100,000 lines of 2 KB each, with room


def _pair(row: object, number: int, where: str) -> CheckPair:
    """One line's pair: question, text, relevant; optional id and title (as documents have)."""
    if not isinstance(row, dict):
        raise ConfigError(f"{where}:{number}: not a JSON object")
    question, text, relevant = row.get("question"), row.get("text"), row.get("relevant")
    if relevant in (0, 1) and not isinstance(relevant, bool):
        relevant = bool(relevant)
    ident = row.get("id", f"pair-{number}")
    title = row.get("title", "")
    if not (
        isinstance(question, str)
        and question.strip()
        and isinstance(text, str)
        and text.strip()
        and isinstance(relevant, bool)
        and isinstance(ident, str)
        and ident.strip()
        and isinstance(title, str)
    ):
        raise ConfigError(
            f"{where}:{number}: need question (text), text (text) and relevant (true/false); "
            "id and title, when given, are text"
        )
    if title.strip():  # as the loaders index a titled record: the title in front, and kept
        return CheckPair(question, Document(ident, f"{title}\n{text}", {"title": title}), relevant)
    return CheckPair(question, Document(ident, text), relevant)


def read_pairs(path: str) -> tuple[CheckPair, ...]:
    """Labelled pairs from a JSON Lines file: ``{"question", "text", "relevant"}`` per line.

    ``relevant`` is ``true``/``false`` (``1``/``0`` too); an optional ``id`` names the document
    (default ``pair-N``, N the line number) and an optional ``title`` is its title, as a
    document's (the offline judge reads titles). Blank lines are skipped. Read through
    :func:`corrective_rag.inputs.read_bounded_lines`: a device, a FIFO, a line of more than
    1 MB, invalid UTF-8 or JSON nested too deep each end in one error naming the file.

    Raises:
        ConfigError: the file cannot be read, a line is not such an object, an id repeats
            within a question, or it has no pairs.
    """
    pairs: list[CheckPair] = []
    seen: set[tuple[str, str]] = set()
    lines = read_bounded_lines(
        path, max_bytes=_MOST_BYTES, max_line_bytes=_MOST_LINE_BYTES, error=ConfigError
    )
    for number, line in lines:
        if len(pairs) >= _MOST_PAIRS:
            raise ConfigError(f"{path}: more than {_MOST_PAIRS:,} pairs: too many for a check")
        row = loads_bounded(line, f"{path}:{number}", error=ConfigError)
        pair = _pair(row, number, path)
        key = (pair.question, pair.document.id)
        if key in seen:
            raise ConfigError(f"{path}:{number}: id {pair.document.id!r} repeats for its question")
        seen.add(key)
        pairs.append(pair)
    if not pairs:
        raise ConfigError(f"{path}: no pairs")
    return tuple(pairs)
