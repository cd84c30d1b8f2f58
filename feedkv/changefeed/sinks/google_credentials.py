"""The Google credentials of ``gs://`` and ``gcpubsub://`` sink URIs, as CockroachDB
reads them: ``CREDENTIALS``, a service account's JSON key base64-encoded (standard or
URL-safe, padding optional), and ``ASSUME_ROLE``, a service account to impersonate with
those credentials, or a chain ``<delegate>,...,<target>`` whose last account is the one
impersonated. Impersonation is IAM Credentials' ``generateAccessToken``
(``https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/<target>:generateAccessToken``,
google-auth's ``impersonated_credentials``): the caller's token needs the
``cloud-platform`` scope, as CockroachDB asks for it, and the token it gets back is the
target's, for the sink's own scope.

Errors in the parameters are SQLError 22023, naming the parameter.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from feedkv.changefeed.options import option_error

__all__ = [
    "CLOUD_PLATFORM_SCOPE",
    "IAM_CREDENTIALS",
    "generate_access_token_url",
    "impersonating",
    "role_chain",
    "service_account",
]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # to impersonate
IAM_CREDENTIALS = "https://iamcredentials.googleapis.com"
_SERVICE_ACCOUNT = re.compile(r"[^@\s,]+@[^@\s,]+")


def role_chain(given: str | None) -> list[str]:
    """``ASSUME_ROLE``'s service accounts, the one to impersonate last (``[]``: none)."""
    if given is None:
        return []
    chain = [part.strip() for part in given.split(",")]
    for account in chain:
        if not _SERVICE_ACCOUNT.fullmatch(account):
            raise option_error(
                f"sink parameter ASSUME_ROLE={given!r}: {account!r} is not a service account "
                "email such as 'feeds@project.iam.gserviceaccount.com' (a chain is "
                "comma-separated, the account to impersonate last)"
            )
    return chain


def service_account(given: str, scopes: list[str] | None = None) -> Any:
    """The service account credentials of ``CREDENTIALS`` (with ``scopes``, if given)."""
    from google.oauth2 import service_account as accounts

    text = given.strip().replace(" ", "+").translate(str.maketrans("-_", "+/"))
    try:
        info = json.loads(base64.b64decode(text + "=" * (-len(text) % 4), validate=True))
        return accounts.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            info, scopes=scopes
        )
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise option_error(
            "sink parameter CREDENTIALS is not a base64-encoded service account key "
            f"(`base64 -w0 key.json`): {exc}"
        ) from None


def generate_access_token_url(base: str, account: str) -> str:
    """``generateAccessToken``'s URL for ``account`` on the IAM Credentials service at
    ``base`` (:data:`IAM_CREDENTIALS`, or a stand-in's URL)."""
    return f"{base.rstrip('/')}/v1/projects/-/serviceAccounts/{account}:generateAccessToken"


def impersonating(source: Any, chain: list[str], scopes: list[str], iam_url: str | None) -> Any:
    """Credentials of the last account of ``chain``, for ``scopes``, obtained with
    ``source``'s through the others as delegates; refreshed by google-auth when they
    expire. ``iam_url``: ``generateAccessToken``'s URL with ``{}`` for the account
    (``None``: Google's)."""
    from google.auth import impersonated_credentials

    *delegates, target = chain
    return impersonated_credentials.Credentials(  # type: ignore[no-untyped-call]
        source_credentials=source,
        target_principal=target,
        target_scopes=scopes,
        delegates=delegates or None,
        iam_endpoint_override=iam_url.format(target) if iam_url else None,
    )
