"""Missing, expired or refused AWS credentials, told apart from every other AWS error.

Every command that calls AWS reports them the same way: ``AwsCredentialsError`` (one line with the fix,
exit 6). A missing permission (``AccessDenied``) is not a credentials problem: the credentials work, one
API is denied, and the caller says which permission to add (``AwsAccessDeniedError``, exit 12). An endpoint
that does not answer (no network) is ``AwsUnreachableError`` (exit 6). ``aws_error`` tells all three apart
from a bug.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectionError,
    CredentialRetrievalError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    SSOError,
    TokenRetrievalError,
)

from infra.core.errors import AwsAccessDeniedError, AwsCredentialsError, AwsUnreachableError, PlatformError
from infra.core.facts import CallerIdentity

# Error codes AWS answers when the credentials themselves are expired or unknown, from the errors common
# to all AWS APIs (https://docs.aws.amazon.com/awsconsolehelpdocs/latest/gsg/common-errors.html); STS and
# the Query APIs spell the expired one ExpiredToken, EC2 answers AuthFailure, S3 InvalidAccessKeyId.
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired"})
REFUSED_CODES = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
        "InvalidToken",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "AuthFailure",
    }
)


def credentials_problem(exc: BaseException) -> str | None:
    """What is wrong with the credentials, in a few words with AWS's error; None when ``exc`` is some
    other error (a denied API, an endpoint that does not answer, a bug)."""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"none found ({exc})"
    if isinstance(exc, ProfileNotFound):
        return f"no such profile ({exc})"
    if isinstance(exc, SSOError | TokenRetrievalError):
        return f"the SSO session has expired or is invalid ({exc})"
    if isinstance(exc, CredentialRetrievalError):
        return f"they could not be retrieved ({exc})"
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), " ".join(str(err.get("Message", "")).split())
        if code in EXPIRED_CODES:
            return f"they have expired ({code}: {message})"
        if code in REFUSED_CODES:
            return f"AWS refused them ({code}: {message})"
    return None


def credentials_error(exc: BaseException) -> AwsCredentialsError | None:
    """``exc`` as the one credentials error every command reports, or None when it is another error."""
    if isinstance(exc, AwsCredentialsError):
        return exc
    problem = credentials_problem(exc)
    return AwsCredentialsError(problem) if problem else None


# A denied call's codes: IAM's AccessDenied (Query and REST-XML APIs), AccessDeniedException (JSON APIs:
# EKS, CloudWatch Logs, ECR), EC2's UnauthorizedOperation
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html).
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
# "... is not authorized to perform: logs:FilterLogEvents on resource: ..." (the IAM message format)
_ACTION = re.compile(r"perform: ([A-Za-z0-9-]+:[A-Za-z0-9]+)")


def _denied_action(exc: ClientError, message: str) -> str:
    """The IAM action AWS names in its message, else the API operation the client called."""
    found = _ACTION.search(message)
    return found.group(1) if found else exc.operation_name


def aws_error(exc: BaseException) -> PlatformError | None:
    """``exc`` as the user's error when it is one: credentials (missing, expired, refused), an endpoint
    that did not answer, or a denied API call; None for anything else (a bug)."""
    if (creds := credentials_error(exc)) is not None:
        return creds
    if isinstance(exc, ConnectionError | ConnectionClosedError | ReadTimeoutError):
        kwargs = getattr(exc, "kwargs", {})
        endpoint = kwargs.get("endpoint_url") or kwargs.get("proxy_url") or "the AWS endpoint"
        return AwsUnreachableError(str(endpoint), type(exc).__name__)
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), " ".join(str(err.get("Message", "")).split())
        if code in DENIED_CODES:
            action = _denied_action(exc, message)
            return AwsAccessDeniedError(action, f"{code}: {message}" if message else code)
    return None


def require_credentials(sts: Any) -> CallerIdentity:
    """Who the credentials are (``sts:GetCallerIdentity``, which needs no permission); raises
    ``AwsCredentialsError`` when they are missing, expired or refused. Other AWS errors propagate."""
    try:
        r = sts.get_caller_identity()
    except (ClientError, BotoCoreError) as exc:
        refused = credentials_error(exc)
        if refused is not None:
            raise refused from exc
        raise
    return CallerIdentity(account=r["Account"], arn=r["Arn"])
