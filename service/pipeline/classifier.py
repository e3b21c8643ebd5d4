"""Rule-based query classifier (no LLM): query type, entities, suggested weights, expanded queries.

* relationship: the query asks how things relate ("relationship between", "compare", 関係, 違い, 影響).
* global: the query asks about a whole collection ("overview", "main themes", 概要, 傾向, 全体).
* hybrid: both kinds of cue are present.
* local: a specific fact about specific things (everything else).

Suggested weights follow the type, with two refinements for local queries: one that names nothing leans on
keyword, and an English question about named things leans on the graph (see the constants).

Capitalisation finds names only where the query's letter case says something. A query typed all in lower
case (or in capitals) is looked up in the index's own dictionary of names instead (`known_names`: the graph's
entity names, document titles among them), so "who directed scott derrickson's first film?" is classified
and weighted as "Who directed Scott Derrickson's first film?" is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.entities import casing_informative
from hybridrag.indexing.analysis.text import has_japanese
from hybridrag.schemas.base import QueryTypeName
from hybridrag.schemas.search import QueryClassification, SearchWeights

_REL_EN = re.compile(
    r"\b(relationship|relationships|relation|relations|related|relate|connection|connections|connected|"
    r"link(?:ed|s)?|compare[ds]?|comparison|versus|vs\.?|differences?|interact(?:ion|ions|s)?|"
    r"influence[ds]?|affect(?:ed|s)?|impact of .+ on|between)\b",
    re.I,
)
_GLOBAL_EN = re.compile(
    r"\b(overview|summar(?:y|ise|ize)|main (?:themes?|topics?|ideas?|points?|findings?)|key (?:themes?|topics?|"
    r"trends?|findings?)|trends?|overall|in general|landscape|across (?:all|the)|common (?:themes?|patterns?)|"
    r"what are the|list of all|broadly)\b",
    re.I,
)
_REL_JA = re.compile(r"(関係|関連|つながり|繋がり|違い|比較|影響|相関|との間|関わり)")
_GLOBAL_JA = re.compile(r"(概要|全体|傾向|まとめ|主な|動向|総括|一覧|全般|要約|主要な|テーマ)")
_QUOTED = re.compile(r"[\"“「『]([^\"”」』]{1,80})[\"”」』]")
_CAP_SEQ = re.compile(r"\b([A-Z][\w\-’']*(?:\s+(?:of|de|van|von|the|and|&)?\s*[A-Z][\w\-’']*)*)")
_QUESTION_WORDS = frozenset(
    (
        "what which who whom whose when where why how is are was were do does did can could should would "
        "tell list name describe explain give find show compare summarize summarise"
    ).split()
)

# (keyword, semantic, graph). Chosen on the three dev sets together (one setting for all, see
# benchmarks/docs/quality.md): at chunk level the graph helps multi-hop questions a little (HotpotQA) and
# costs claim-style and reading-comprehension queries (SciFact, JaQuAD) when weighted above ~0.1, so it
# carries more weight only where the query asks about relations or the collection as a whole.
WEIGHTS_BY_TYPE: dict[str, tuple[float, float, float]] = {
    "local": (0.5, 0.4, 0.1),
    "global": (0.3, 0.4, 0.3),
    "relationship": (0.4, 0.35, 0.25),
    "hybrid": (0.4, 0.35, 0.25),
}

# An English question about named things ("Where was the director of X born?") is what the graph's walk answers
# best (its list already carries the dense and keyword seeds' evidence, and it reaches the bridge passage);
# lighter graph weights ranked first-hop passages above the bridges (benchmarks/README.md, "Constants").
ENTITY_QUESTION = (0.05, 0.15, 0.8)
_QUESTION_EN = re.compile(
    r"^\W*(?:what|which|who|whom|whose|when|where|why|how|in (?:what|which)|is|are|was|were|did|does|do)\b"
    r"|\?\s*$",
    re.I,
)

# Japanese names come from Sudachi alone, so the graph's Japanese list is weaker and BM25 over Sudachi + bigrams
# the strongest there (benchmarks/README.md, "Constants").
JAPANESE_LOCAL = (0.6, 0.35, 0.05)

# A query that names nothing gets little from the graph (it is reached through named entities); its share goes
# to keyword, which held up better than semantic on such descriptive queries (JaQuAD, SciFact dev).
LOCAL_WITHOUT_ENTITIES = (0.55, 0.4, 0.05)


@dataclass(frozen=True, slots=True)
class _Cues:
    relationship: int
    global_: int


def suggested_weights(
    text: str, qtype: str, entities: list[str]
) -> tuple[tuple[float, float, float], str | None]:
    """(keyword, semantic, graph) for a query, and why they differ from its type's, when they do."""
    if qtype != "local":
        return WEIGHTS_BY_TYPE[qtype], None
    english_question = not has_japanese(text) and bool(_QUESTION_EN.search(text))
    if english_question and entities:
        return ENTITY_QUESTION, "an English question naming things: the graph's walk leads"
    if english_question and not casing_informative(text):
        # It may name things neither capitals nor the index's names reveal (a name that is no document's
        # title): weighted as the same question with capitals would be.
        return ENTITY_QUESTION, "an English question typed without letter case: weighted as one naming things"
    if not entities:
        return LOCAL_WITHOUT_ENTITIES, "names nothing: keyword leads, the graph has little to walk from"
    if has_japanese(text):
        return (
            JAPANESE_LOCAL,
            "a Japanese local query: keyword leads, the graph's Japanese names are not linked by case-free titles or phrases",
        )
    return WEIGHTS_BY_TYPE[qtype], None


class QueryClassifier:
    """Classifies a query from its wording and the entities it names."""

    def __init__(self, analyzer: Analyzer, known_names: Callable[[str], list[str]] | None = None) -> None:
        self._analyzer = analyzer
        self._known_names = known_names

    def entities(self, text: str, morphemes: list[tuple[str, ...]] | None = None) -> list[str]:
        """Named things in the query: quoted strings, capitalised sequences, Japanese proper nouns; in a
        query whose letter case says nothing, the index's names it contains. `morphemes`: the query's
        Japanese morphemes when the caller has them."""
        found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(text)]
        if has_japanese(text):
            found.extend(self._japanese_entities(self._morphemes(text) if morphemes is None else morphemes))
        # Japanese has no letter case: a Latin name in it ("NHKの…") keeps the capitalisation rule.
        cased = casing_informative(text) or has_japanese(text)
        if not cased and self._known_names is not None:
            found.extend(self._known_names(text))
        for m in _CAP_SEQ.finditer(text if cased else ""):
            phrase = m.group(1).strip()
            words = phrase.split()
            while words and words[0].lower() in _QUESTION_WORDS | ENGLISH_STOPWORDS:
                words = words[1:]
            if words and (len(words) > 1 or len(words[0]) > 1):
                found.append(" ".join(words))
        out: list[str] = []
        for item in found:
            if item and item.lower() not in {o.lower() for o in out}:
                out.append(item)
        return out

    def _morphemes(self, text: str) -> list[tuple[str, ...]]:
        return [
            (surface, pos[0], pos[1]) for surface, _n, pos, _b, _e in self._analyzer.japanese.morphemes(text)
        ]

    @staticmethod
    def _japanese_entities(morphemes: list[tuple[str, ...]]) -> list[str]:
        out: list[str] = []
        current: list[str] = []
        for surface, pos0, pos1 in morphemes:
            proper = pos0 == "名詞" and (pos1 == "固有名詞" or (current and pos1 == "普通名詞"))
            if proper:
                current.append(surface)
                continue
            if current:
                out.append("".join(current))
                current = []
        if current:
            out.append("".join(current))
        return [e for e in out if len(e) > 1]

    def _cues(self, text: str) -> _Cues:
        rel = len(_REL_EN.findall(text)) + len(_REL_JA.findall(text))
        glo = len(_GLOBAL_EN.findall(text)) + len(_GLOBAL_JA.findall(text))
        return _Cues(rel, glo)

    def classify(self, text: str) -> QueryClassification:
        return self.classify_explained(text)[0]

    def classify_explained(self, text: str) -> tuple[QueryClassification, str | None]:
        """The classification, and why its suggested weights differ from its type's (None: they do not)."""
        morphemes = self._morphemes(text) if has_japanese(text) else []
        entities = self.entities(text, morphemes)
        cues = self._cues(text)
        qtype: QueryTypeName
        if cues.relationship and cues.global_:
            qtype, confidence = "hybrid", 0.55
        elif cues.relationship:
            # "between A and B" with two entities is the clearest relationship question there is.
            qtype = "relationship"
            confidence = min(0.95, 0.6 + 0.1 * cues.relationship + (0.15 if len(entities) >= 2 else 0.0))
        elif cues.global_:
            qtype = "global"
            confidence = min(0.95, 0.6 + 0.1 * cues.global_ + (0.1 if not entities else 0.0))
        else:
            qtype = "local"
            confidence = 0.7 if entities else 0.55
        (kw, sem, graph), why = suggested_weights(text, qtype, entities)
        classification = QueryClassification(
            original_query=text,
            type=qtype,
            confidence=round(confidence, 3),
            extracted_entities=entities,
            suggested_weights=SearchWeights(keyword=kw, semantic=sem, graph=graph),
            expanded_queries=self._expansions(text, entities, morphemes),
        )
        return classification, why

    def _expansions(self, text: str, entities: list[str], morphemes: list[tuple[str, ...]]) -> list[str]:
        """Sub-queries a research agent can run: the key terms alone, then each entity."""
        out: list[str] = []
        if has_japanese(text):
            key = " ".join(surface for surface, pos0, _pos1 in morphemes if pos0 in ("名詞", "動詞"))
        else:
            words = [w for w in re.findall(r"[\w\-’']+", text) if w.lower() not in ENGLISH_STOPWORDS]
            key = " ".join(w for w in words if w.lower() not in _QUESTION_WORDS)
        if key and key != text.strip():
            out.append(key)
        for entity in entities:
            if entity != text.strip() and entity not in out:
                out.append(entity)
        return out[:8]
