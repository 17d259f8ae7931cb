"""Store URLs shown in messages without their passwords, whatever characters a password holds.

A URL parser reads ``redis://:ab/cd@host`` as a path, not a password (a ``/`` ends the
authority), so redacting what the parser calls the password leaves a base64 secret whole in the
message. Here the user information is everything between ``://`` and the last ``@`` of the URL
(a Redis URL's path and query hold no ``@``): all of it after the user name is hidden, and so is
a ``password=`` in the query.
"""

from __future__ import annotations

import re

__all__ = ["quoted_userinfo", "redact_url", "redacted"]

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s'\"]*")
"""A URL in a text: from its scheme to the next blank or quote. Linear: a start that is no URL
costs at most the scheme's 32 characters, and a match ends where the next can start."""
_PASSWORD_PARAMETER = re.compile(r"([?&;]password=)[^&;#]*", re.IGNORECASE)


def _hidden(url: str) -> str:
    scheme, _, rest = url.partition("://")
    at = rest.rfind("@")
    if at >= 0:
        userinfo = rest[:at]
        user, colon, _ = userinfo.partition(":")
        shown = f"{user}:***" if colon and "/" not in user else "***"
        rest = f"{shown}{rest[at:]}"
    return _PASSWORD_PARAMETER.sub(r"\1***", f"{scheme}://{rest}")


def redacted(text: str) -> str:
    """``text`` with every URL's password (and any ``password=`` parameter) replaced by ``***``."""
    return _TOKEN.sub(lambda match: _hidden(match.group()), text) if "://" in text else text


def redact_url(url: str) -> str:
    """The URL, quoted, with its password (if any) replaced by ``***``: for messages."""
    return repr(_hidden(url)) if "://" in url else repr(url)


def quoted_userinfo(url: str) -> str:
    """``url`` with ``/``, ``?`` and ``#`` in its user information percent-encoded, so that a
    password holding them (base64 secrets do) reaches the server instead of breaking the URL.
    The Redis client decodes the user name and password it reads."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0 or scheme not in ("redis", "rediss"):
        return url
    userinfo = rest[:at].replace("/", "%2F").replace("?", "%3F").replace("#", "%23")
    return f"{scheme}://{userinfo}{rest[at:]}"
