"""Filters in the index's own terms, shared by every store (keyword, vector, graph)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True, slots=True)
class ChunkFilters:
    """Which chunks may be returned. None means "no constraint"; an empty list matches nothing.

    Dates are naive UTC datetimes; a chunk without a date never passes a date constraint.
    """

    file_ids: Sequence[str] | None = None
    entity_types: Sequence[str] | None = None
    date_start: datetime | None = None
    date_end: datetime | None = None
    chunk_ids: Sequence[str] | None = None

    @property
    def active(self) -> bool:
        return any(
            v is not None
            for v in (self.file_ids, self.entity_types, self.date_start, self.date_end, self.chunk_ids)
        )


def naive_utc(value: datetime | None) -> datetime | None:
    """The form every store compares dates in: naive, UTC (an aware datetime is converted)."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
