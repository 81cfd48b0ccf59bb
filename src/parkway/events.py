"""The event envelope."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Event:
    """Something that happened, named, about one subject of one domain.

    Args:
        name: What happened (``"order.created"``).
        payload: JSON-serialisable data.
        id: A unique id; a repeat within ``event_retention`` is a duplicate.
        domain: The event's domain; wins over the engine's ``event_extractor``.
        subject: The business entity it is about (``"product:456"``).
    """

    name: str
    payload: Any = None
    id: str | None = field(default=None, kw_only=True)
    domain: str | None = field(default=None, kw_only=True)
    subject: str | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The envelope as a JSON-friendly dict."""
        return {
            "name": self.name,
            "payload": self.payload,
            "id": self.id,
            "domain": self.domain,
            "subject": self.subject,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            data["name"],
            data.get("payload"),
            id=data.get("id"),
            domain=data.get("domain"),
            subject=data.get("subject"),
        )
