"""The base class of every error parkway raises."""

from __future__ import annotations


class ParkwayError(Exception):
    """Base class of every error raised by parkway."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or type(self).__name__).strip())
