"""Names in a sequence of BIO tags, read one way by the taggers and by the benchmark's reader of tagged data."""

from __future__ import annotations

from collections.abc import Sequence


def bio_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """The names in `tags` ("B-person", "I-person", "O", ...) as (first position, last position + 1, type).

    An I- tag continues a name of its own type that the tag before it is part of; any other I- tag starts a
    name, as a B- tag does (taggers emit such stray tags, and tagged data has them). A tag that is neither
    B- nor I- is outside every name.
    """
    spans: list[list[int | str]] = []
    open_kind: str | None = None
    for i, tag in enumerate(tags):
        prefix, kind = tag[:2], tag[2:]
        if prefix not in ("B-", "I-"):
            open_kind = None
        elif prefix == "I-" and open_kind == kind:
            spans[-1][1] = i + 1
        else:
            spans.append([i, i + 1, kind])
            open_kind = kind
    return [(int(a), int(b), str(k)) for a, b, k in spans]
