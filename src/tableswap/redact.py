"""Masking secrets in anything tableswap shows: error messages, ``doctor``, ``--json``, logs.

One place decides what a secret looks like, so that every output masks the same way:

* :func:`mask_url`: a URL's user-info password (``postgresql://u:***@host/db``, also when the password
  holds an unescaped ``@``: the *last* ``@`` before the host ends the user-info) and its query or
  fragment parameters whose names look secret (``?password=``, ``sslpassword``, ``token``, ``key``,
  ``X-Amz-Signature``, ...). It never raises: what it cannot parse it masks conservatively.
* :func:`mask_text`: every URL inside free text, ``name=value`` / ``name: value`` pairs whose names are
  secret settings (``password=...``, ``fs.s3a.secret.key=...``, ``AWS_SECRET_ACCESS_KEY=...``), and any
  known secret value given (the password of the configured journal URL, say) wherever it appears.
* :func:`mask_data`: the same over a JSON-like structure (``--json`` payloads, log events).
* :func:`known_secrets`: the secret values this process was configured with (the journal and metastore
  URLs' passwords and secret parameters, environment variables named like ``*_PASSWORD``, ``*_SECRET``,
  ``*_TOKEN``, ``*_SECRET_ACCESS_KEY``), for the outputs at the edges (CLI, doctor, logs) to scrub too.

Shared by every layer (like :mod:`tableswap.errors`); pure except :func:`known_secrets`, which reads the
environment.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Iterable
from urllib.parse import quote, unquote

MASK = "***"

# Names (lower-cased, only letters and digits kept) that are secret when they end with one of these ...
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "credential",
                   "credentials", "signature", "sig", "apikey", "accesskey", "secretkey", "privatekey",
                   "sessionkey", "accountkey")
# ... or contain one of these.
_SECRET_PARTS = ("password", "passwd", "secret", "credential", "token")
# What usage messages write in place of a user and password (``postgresql://USER[:PASSWORD]@HOST``): kept,
# but only as a pair (a real password that happens to be "PASSWORD" is masked).
_PLACEHOLDER_USERS = {"USER", "USER["}
_PLACEHOLDER_PASSWORDS = {"PASSWORD", "PASSWORD]"}


def _shown_as_is(user: str, password: str) -> bool:
    return password == MASK or (user in _PLACEHOLDER_USERS and password in _PLACEHOLDER_PASSWORDS)
# Environment variables whose names end like a secret but hold none.
_NOT_SECRET_ENV = {"PWD", "OLDPWD"}

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.\-])(?=([A-Za-z][A-Za-z0-9+.\-]*))\1://[^\s'\"`<>]*")
_PARAM = re.compile(r"(^|[&;])([^=&;#]*)=([^&;#]*)")
# name=value or name: value in free text (the name optionally quoted, as in JSON or a repr).
# The lookbehind starts names only at a word's start and the lookahead-backreference pair matches the
# name atomically: linear time on long runs of word characters (no backtracking into the name).
_PAIR = re.compile(r"""(?P<q>["']?)(?<![\w.\-])(?=(?P<name>[A-Za-z_][\w.\-]*))(?P=name)(?P=q)"""
                   r"""(?P<sep>\s*[=:]\s*)(?P<vq>["']?)(?P<value>[^\s"',;&)}\]]+)""")


def _flat(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_secret_name(name: str) -> bool:
    """Whether a URL parameter (or setting) named ``name`` holds a secret: ``password``,
    ``sslpassword``, ``token``, ``access_token``, ``key``, ``api_key``, ``X-Amz-Signature``, ... ."""
    flat = _flat(name)
    if not flat:
        return False
    return flat == "key" or flat.endswith(_SECRET_ENDINGS) or any(p in flat for p in _SECRET_PARTS)


def _is_secret_setting(name: str) -> bool:
    """Stricter, for ``name=value`` in free text: a bare ``key``, ``pass`` or ``sig`` is too common there
    (a partition column named ``key``), so only names that end like a password, secret or token, or a
    ``*.secret.key`` / ``*_access_key``-like key name."""
    flat = _flat(name)
    if flat in ("key", "pass", "sig", "pwd"):
        return False
    return flat.endswith(_SECRET_ENDINGS) or any(p in flat for p in ("password", "passwd", "secret"))


def _mask_params(text: str) -> str:
    """``a=1&password=x`` → ``a=1&password=***`` (a query string or fragment)."""
    return _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(unquote(m.group(2)))
                      and m.group(3) else m.group(0), text)


def _split_userinfo(rest: str) -> tuple[str | None, str]:
    """``rest`` (a URL after ``scheme://``) → (user-info or None, the rest from the host on).

    The authority ends at the first ``/``, ``?`` or ``#``. When it holds an ``@`` or a ``:`` and an ``@``
    follows anywhere, everything up to the *last* ``@`` is taken as the user-info: a password may hold
    unescaped ``@``, ``/``, ``?`` or ``#``, and masking too much (a query value with an ``@`` in a URL
    that has a port) is better than showing part of a password."""
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    authority = rest[:end]
    if "@" in authority or (":" in authority and not authority.startswith("[") and "@" in rest):
        at = rest.rfind("@")
        return rest[:at], rest[at + 1:]
    return None, rest


def mask_url(url: Any) -> str:
    """``url`` with its user-info password and its secret-looking parameters shown as ``***``.

    Never raises, whatever ``url`` is: text that is not a URL gets its ``name=value`` secrets masked.
    A comma-separated list of URLs (a highly available metastore) is masked as one: a password in any of
    them hides everything from the first user-info on."""
    text = url if isinstance(url, str) else str(url)
    match = _SCHEME.match(text.lstrip())
    if not match:
        return _mask_pairs(text)
    lead = len(text) - len(text.lstrip())
    head, rest = text[: lead + match.end()], text[lead + match.end():]
    userinfo, after = _split_userinfo(rest)
    if userinfo is not None:
        user, colon, password = userinfo.partition(":")
        if colon and password and not _shown_as_is(user, password):
            userinfo = f"{user}:{MASK}"
        head += userinfo + "@"
    query_at = min((i for i in (after.find("?"), after.find("#")) if i >= 0), default=-1)
    if query_at >= 0:
        after = after[:query_at] + _mask_params_all(after[query_at:])
    return head + after


def _mask_params_all(tail: str) -> str:
    """``?a=1&token=x#k=v`` → masks parameters of the query and of the fragment."""
    out = []
    for piece in re.split(r"([?#])", tail):
        out.append(piece if piece in ("?", "#") else _mask_params(piece))
    return "".join(out)


def _mask_pairs(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        if not _is_secret_setting(name) or m.group("value") == MASK:
            return m.group(0)
        if ":" in m.group("sep") and not m.group("q") and not re.search(r"[._]", name):
            return m.group(0)  # prose ("gives no password: the ..."), not a setting
        return f"{m.group('q')}{m.group('name')}{m.group('q')}{m.group('sep')}{m.group('vq')}{MASK}"
    return _PAIR.sub(repl, text)


def secrets_of(url: str | None) -> set[str]:
    """The secret values inside ``url``: its user-info password and its secret parameters' values,
    each as written and decoded (for :func:`mask_text` to scrub wherever they are echoed)."""
    return set(_secrets_of(str(url))) if url else set()


@functools.lru_cache(maxsize=256)
def _secrets_of(url: str) -> frozenset[str]:
    out: set[str] = set()
    text = str(url).strip()
    match = _SCHEME.match(text)
    userinfo, after = _split_userinfo(text[match.end():]) if match else (None, text)
    if userinfo and ":" in userinfo and not _shown_as_is(userinfo.partition(":")[0], userinfo.partition(":")[2]):
        out.add(userinfo.partition(":")[2])
    if "?" in after or "#" in after:
        for m in _PARAM.finditer(re.split(r"[?#]", after, maxsplit=1)[-1]):
            if is_secret_name(unquote(m.group(2))) and m.group(3):
                out.add(m.group(3))
    out |= {unquote(s) for s in out}
    return frozenset(s for s in out if s)


@functools.lru_cache(maxsize=1024)
def _secret_env_name(name: str) -> bool:
    return name.upper() not in _NOT_SECRET_ENV and _flat(name).endswith(_SECRET_ENDINGS)


def known_secrets(*urls: str | None) -> set[str]:
    """The secret values of ``urls`` and of this process's configuration: the journal and metastore
    URLs (``TABLESWAP_JOURNAL_URL``, ``TABLESWAP_METASTORE_URI``) and environment variables whose names
    end like a secret (``PGPASSWORD``, ``MYSQL_PWD``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
    ``FSSPEC_S3_SECRET``, ``TRINO_PASSWORD``, ...)."""
    out: set[str] = set()
    for url in (*urls, os.environ.get("TABLESWAP_JOURNAL_URL"), os.environ.get("TABLESWAP_METASTORE_URI")):
        out |= secrets_of(url)
    for name, value in os.environ.items():
        if value and _secret_env_name(name):
            out.add(value)
    return out


#: Shorter known values are not scrubbed from free text (they would garble it); they are still masked
#: wherever they appear as a URL's password or a secret parameter.
MIN_SCRUB = 4


def mask_text(text: Any, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL masked (:func:`mask_url`), secret ``name=value`` settings masked, and each
    of ``secrets`` (values of at least :data:`MIN_SCRUB` characters, also percent-encoded) replaced by
    ``***`` wherever it appears."""
    out = text if isinstance(text, str) else str(text)
    for value in sorted({s for s in secrets if s and len(s) >= MIN_SCRUB}, key=len, reverse=True):
        for form in {value, quote(value, safe=""), quote(value, safe=":/@")}:
            out = out.replace(form, MASK)
    out = _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), out)
    return _mask_pairs(out)


def mask_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """:func:`mask_text` over every string of a JSON-like structure (dict keys are kept; the value of a
    key that names a secret is masked whole)."""
    secrets = tuple(secrets)
    if isinstance(data, str):
        return mask_text(data, secrets)
    if isinstance(data, dict):
        return {k: (MASK if isinstance(k, str) and _is_secret_setting(k) and v not in (None, "")
                    else mask_data(v, secrets)) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(mask_data(v, secrets) for v in data) if isinstance(data, list) else \
            tuple(mask_data(v, secrets) for v in data)
    return data


__all__ = ["MASK", "is_secret_name", "known_secrets", "mask_data", "mask_text", "mask_url", "secrets_of"]
