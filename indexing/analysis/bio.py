"""Names in a sequence of BIO tags, read one way by the taggers and by the benchmark's reader of tagged data."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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


def best_bio(scores: np.ndarray, labels: Sequence[str]) -> list[str]:
    """The most probable tag sequence that BIO allows, given each position's log-probability of each label
    (positions x labels; `labels` name the columns): an I- tag only after a B- or I- tag of its own type.
    Ties go to the earlier label, so the result is a function of the scores alone."""
    n, width = scores.shape
    if width != len(labels):
        raise ValueError(f"{width} columns for {len(labels)} labels")
    if n == 0:
        return []
    inside = np.array([label.startswith("I-") for label in labels])
    kinds = [label[2:] if label[:2] in ("B-", "I-") else None for label in labels]
    # allowed[i, j]: label j may follow label i.
    allowed = np.array(
        [
            [not inside[j] or (kinds[i] is not None and kinds[i] == kinds[j]) for j in range(width)]
            for i in range(width)
        ]
    )
    barrier = np.where(allowed, 0.0, -np.inf)
    best = np.where(inside, -np.inf, scores[0])
    back = np.zeros((n, width), dtype=np.int64)
    for t in range(1, n):
        paths = best[:, None] + barrier
        back[t] = paths.argmax(axis=0)
        best = paths.max(axis=0) + scores[t]
    path = [int(best.argmax())]
    for t in range(n - 1, 0, -1):
        path.append(int(back[t][path[-1]]))
    return [labels[j] for j in reversed(path)]
