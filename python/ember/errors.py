"""Ember's errors: every failed call raises an EmberError subclass that carries the
gRPC/absl status code (``.code``, e.g. ``"UNAVAILABLE"``) and the message.

The classes also derive from the builtin exception a Python user would expect:
InvalidArgumentError is a ValueError, NotFoundError a LookupError, DeadlineExceededError
a TimeoutError. ``RECOVERABLE`` lists the codes a job recovers from by rejoining (a
shard, peer or coordinator that failed): what ``ember.Job.run`` retries.
"""

RECOVERABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "CANCELLED"})


class EmberError(Exception):
    """A failed Ember call: ``code`` (the status code's name), ``code_value`` (its
    number) and ``message``."""

    code = "UNKNOWN"
    code_value = 2

    def __init__(self, message, code=None, code_value=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if code_value is not None:
            self.code_value = code_value

    @property
    def recoverable(self):
        return self.code in RECOVERABLE

    def __str__(self):
        return f"{self.code}: {self.message}"


class InvalidArgumentError(EmberError, ValueError):
    code, code_value = "INVALID_ARGUMENT", 3


class DeadlineExceededError(EmberError, TimeoutError):
    code, code_value = "DEADLINE_EXCEEDED", 4


class NotFoundError(EmberError, LookupError):
    code, code_value = "NOT_FOUND", 5


class AlreadyExistsError(EmberError):
    code, code_value = "ALREADY_EXISTS", 6


class PermissionDeniedError(EmberError):
    code, code_value = "PERMISSION_DENIED", 7


class ResourceExhaustedError(EmberError):
    code, code_value = "RESOURCE_EXHAUSTED", 8


class FailedPreconditionError(EmberError):
    code, code_value = "FAILED_PRECONDITION", 9


class AbortedError(EmberError):
    code, code_value = "ABORTED", 10


class OutOfRangeError(EmberError):
    code, code_value = "OUT_OF_RANGE", 11


class UnimplementedError(EmberError):
    code, code_value = "UNIMPLEMENTED", 12


class InternalError(EmberError):
    code, code_value = "INTERNAL", 13


class UnavailableError(EmberError, ConnectionError):
    code, code_value = "UNAVAILABLE", 14


class DataLossError(EmberError):
    code, code_value = "DATA_LOSS", 15


class UnauthenticatedError(EmberError):
    code, code_value = "UNAUTHENTICATED", 16


class CancelledError(EmberError):
    code, code_value = "CANCELLED", 1


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, DeadlineExceededError, NotFoundError, AlreadyExistsError,
    PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError, DataLossError,
    UnauthenticatedError, CancelledError)}


def from_status(code_value, code, message):
    """The exception for a failed status (called by the native module)."""
    cls = _BY_CODE.get(code, EmberError)
    return cls(message, code=code, code_value=code_value)
