"""The exceptions a strata call raises: one per Status code of the C++ API
(include/strata/status.h), all under strata.Error, each carrying the
message the C++ call returned. Where a Python built-in means the same thing
the class derives from it too, so `except ValueError` catches bad input."""


class Error(Exception):
    """Any error a strata call returned."""


class InvalidArgument(Error, ValueError):
    """Bad input: an unknown option, a wrong dimension, a clock moving back."""


class NotFound(Error, LookupError):
    """Something named does not exist (a table, a worker, a directory's file)."""


class IOError(Error, OSError):  # noqa: A001 - the Status code's own name
    """The SSD tier or a file failed; dirty rows stay in memory, a retry may succeed."""


class Corruption(Error):
    """A checksum or format check failed: the bytes are not what was written."""


class ResourceExhausted(Error):
    """A tier or the disk has no room for the rows asked for."""


class FailedPrecondition(Error):
    """The store is in the wrong state for the call (closed, stopped after an error)."""


class Unavailable(Error):
    """A resource is not there now (no GPU, a device busy)."""


class Internal(Error):
    """A broken invariant inside strata: please report it."""


BY_CODE = {
    "InvalidArgument": InvalidArgument,
    "NotFound": NotFound,
    "IOError": IOError,
    "Corruption": Corruption,
    "ResourceExhausted": ResourceExhausted,
    "FailedPrecondition": FailedPrecondition,
    "Unavailable": Unavailable,
    "Internal": Internal,
}
