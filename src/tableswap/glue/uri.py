"""``glue://REGION`` / ``glue://``: parsing the Glue metastore URI (pure; no boto3 here)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tableswap import errors

SCHEME = "glue"
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")


def is_glue_uri(uri: str | None) -> bool:
    return (uri or "").strip().lower().startswith(SCHEME + "://")


def parse_glue_uri(uri: str) -> str | None:
    """The region a ``glue://`` URI names, or ``None`` for ``glue://`` (the region then comes from the
    AWS SDK's usual chain: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, the profile). Anything else (a path,
    a query, user-info, a malformed region) is a :class:`ConfigurationError`."""
    bad = errors.ConfigurationError(
        f"metastore URI {uri.split('@')[-1]!r} is not of the form glue://REGION (e.g. glue://us-east-1) or glue:// "
        "(the region from AWS_REGION / AWS_DEFAULT_REGION or the AWS profile); endpoints and credentials come "
        "from the AWS SDK's standard configuration, not from the URI")
    try:
        parts = urlsplit(uri.strip())
    except ValueError:
        raise bad from None
    if parts.scheme.lower() != SCHEME or parts.path not in ("", "/") or parts.query or parts.fragment \
            or "@" in parts.netloc or ":" in parts.netloc:
        raise bad
    region = parts.netloc.lower()
    if not region:
        return None
    if not _REGION.match(region):
        raise bad
    return region
