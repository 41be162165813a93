"""boto3, imported lazily, and Glue's / DynamoDB's errors mapped onto :mod:`tableswap.errors`.

boto3 is the ``glue`` extra: a process that never opens a Glue catalog never imports it, and one that
does without it installed gets a :class:`ConfigurationError` naming the extra."""

from __future__ import annotations

from typing import Any

from tableswap import errors

#: Glue's limits: keys per BatchGetPartition, entries per BatchCreatePartition / BatchUpdatePartition /
#: BatchDeletePartition.
MAX_GET, MAX_ADD, MAX_ALTER, MAX_DROP = 100, 100, 100, 25

EXTRA_HINT = "the AWS Glue Data Catalog needs boto3: pip install 'tableswap[glue]'"


def boto3_module() -> Any:
    try:
        import boto3
    except ImportError as exc:
        raise errors.ConfigurationError(f"{EXTRA_HINT} ({exc})") from None
    return boto3


def botocore_exceptions() -> Any:
    boto3_module()
    import botocore.exceptions

    return botocore.exceptions


_LOADER: list[Any] = []  # botocore's loader of service models, shared by the sessions of this process


def new_session(region: str | None) -> Any:
    """A boto3 session on the SDK's standard configuration (environment, profiles, ``AWS_ENDPOINT_URL*``);
    ``region`` (from the URI) overrides the configured one. The sessions of a process share one loader of
    service models (Glue's is large: loading it for each connection costs a few hundred milliseconds)."""
    boto3 = boto3_module()
    import botocore.session

    core = botocore.session.get_session()
    if _LOADER:
        core.register_component("data_loader", _LOADER[0])
    else:
        _LOADER.append(core.get_component("data_loader"))
    return boto3.session.Session(botocore_session=core, region_name=region)


def client_config(timeout_s: float) -> Any:
    """botocore's retries off: reads are retried by the adapter (transport errors, throttling) and a
    write is sent once, reconciled by a re-read when its response is lost (never resent blindly)."""
    from botocore.config import Config

    return Config(connect_timeout=min(timeout_s, 60.0), read_timeout=timeout_s,
                  retries={"total_max_attempts": 1, "mode": "standard"})


#: Error codes of a server-side failure or timeout: the request may have been applied before it (Glue's
#: ``InternalServiceException`` and ``OperationTimeoutException`` say nothing either way). A read is retried;
#: a write's outcome is unknown and reconciled by a re-read, never sent again blindly.
MAYBE_APPLIED_CODES = frozenset({"InternalServiceException", "InternalServerError", "ServiceUnavailable",
                                 "ServiceUnavailableException", "OperationTimeoutException", "InternalFailure"})
#: Error codes that say the request was refused without being applied (throttling) and may succeed later.
REFUSED_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                           "ProvisionedThroughputExceededException", "RequestLimitExceeded"})
#: Both: worth retrying for a read (or a conditional write); busy or unavailable for the user.
TRANSIENT_CODES = REFUSED_CODES | MAYBE_APPLIED_CODES


def transport_errors() -> tuple[type[BaseException], ...]:
    """botocore's errors for a request whose response never came (the request may have been applied)."""
    exc = botocore_exceptions()
    return (exc.EndpointConnectionError, exc.ConnectionClosedError, exc.ReadTimeoutError,
            exc.ConnectTimeoutError, exc.ProxyConnectionError, exc.HTTPClientError, ConnectionError)


def error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return (response.get("Error") or {}).get("Code")
    return None


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return (response.get("Error") or {}).get("Message") or str(exc)
    return str(exc)


def translate(exc: BaseException, what: str, *, where: str = "the AWS Glue Data Catalog") -> errors.TableSwapError:
    """One of our errors for a botocore/boto3 error (the message keeps the service's words; botocore's
    messages carry no credentials)."""
    bc = botocore_exceptions()
    code, message = error_code(exc), error_message(exc)
    if code == "EntityNotFoundException" or code == "ResourceNotFoundException":
        return errors.TableNotFoundError(f"{what}: {message}")
    if code == "AlreadyExistsException":
        return errors.CatalogError(f"{what}: already exists: {message}")
    if code == "ConcurrentModificationException":
        return errors.SwapConflictError(f"{what}: changed concurrently in {where} ({message}); nothing was changed. "
                                        "Rerun it")
    if code in TRANSIENT_CODES:
        return errors.CatalogUnavailableError(f"{what}: {where} is busy or unavailable: {code}: {message}")
    if code in ("AccessDeniedException", "AccessDenied", "UnrecognizedClientException",
                "InvalidSignatureException", "ExpiredTokenException", "InvalidClientTokenId"):
        return errors.ConfigurationError(
            f"{what}: {where} refused the credentials ({code}: {message}); they come from the AWS SDK's standard "
            "configuration (AWS_PROFILE, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an instance role)")
    if isinstance(exc, bc.NoCredentialsError):
        return errors.ConfigurationError(
            f"{what}: no AWS credentials found for {where}: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or run where an instance role provides them")
    if isinstance(exc, bc.NoRegionError):
        return errors.ConfigurationError(
            f"{what}: no AWS region: name it in the URI (glue://us-east-1) or set AWS_REGION / AWS_DEFAULT_REGION")
    if isinstance(exc, transport_errors()):
        return errors.CatalogUnavailableError(f"{what}: cannot reach {where}: {exc}")
    if isinstance(exc, bc.ParamValidationError):
        return errors.CatalogError(f"{what}: invalid request: {exc}")
    if code:
        return errors.CatalogError(f"{what}: {where} refused it: {code}: {message}")
    return errors.CatalogError(f"{what}: {type(exc).__name__}: {message}")


def boto_errors() -> tuple[type[BaseException], ...]:
    """Everything botocore raises for a call."""
    return (botocore_exceptions().BotoCoreError, botocore_exceptions().ClientError)
