"""The worker: claims runs with due tasks and advances each under a lease."""

from parkway.worker.loop import Worker

__all__ = ["Worker"]
