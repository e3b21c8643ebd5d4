"""Entity extraction with no LLM and no model download.

* Japanese: Sudachi part-of-speech. Runs of nouns holding a proper noun become one entity; the type comes
  from the dictionary (人名 person, 地名 place, 組織 organization) or from an organisation suffix (大学, 銀行…).
* English: capitalised word sequences (with "of"/"de"/"von" inside) and acronyms, typed by rules: an
  organisation suffix or "University of", a personal title, a preceding "in/at/from" for places, and
  two or three capitalised words otherwise read as a person's name. Only where letter case says something
  (`casing_informative`): an all-capitals or all-lower-case sentence yields no rule-based names, and a
  short title in such a casing is one name as a whole. The graph build then finds every document title's
  name in the text whatever its case (`graph.link_title_names`), so the graph works on `text like this`
  and `TEXT LIKE THIS` as on `Text Like This`.

Surface forms are normalised (NFKC, case, possessive 's, whitespace) so that variants merge.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.span_typer import SpanTyper, packaged_typer, span_features
from hybridrag.indexing.analysis.text import has_japanese, split_sentences

PERSON, PLACE, ORGANIZATION, OTHER = "person", "place", "organization", "other"
ENTITY_TYPES = (PERSON, PLACE, ORGANIZATION, OTHER)

_ORG_SUFFIX_EN = frozenset(
    (
        "inc ltd co corp corporation company companies university institute institution laboratory laboratories "
        "labs school college bank railways railway agency ministry party association society foundation group "
        "council committee army navy government museum academy works motors industries hospital center centre "
        "organisation organization office department commission union federation club"
    ).split()
)
_TITLES_EN = frozenset(
    "mr mrs ms dr prof professor president king queen sir lord lady saint st emperor prince princess pope".split()
)
_EVENT_SUFFIX_EN = frozenset(
    "prize award war wars act treaty protocol test games olympics revolution restoration conference".split()
)
_PLACE_PREP = frozenset("in at from near to across".split())
_NOT_NAMES = frozenset(
    (
        "the a an this that these those he she it they we i you his her its their our my your there here "
        "however after before during when while although since then also in on at by for with from as of "
        "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
        "august september october november december later earlier today yesterday meanwhile finally first "
        "second third also thus hence both each every many most some several other another such"
    ).split()
)
_ORG_SUFFIX_JA = (
    "大学", "会社", "銀行", "省", "庁", "研究所", "協会", "工業", "製作所", "自動車", "新聞社", "財団", "学会",
    "委員会", "政府", "議会", "病院", "博物館", "工務店", "設計", "保険", "鉄道", "製紙", "学校", "党",
    "放送", "テレビ", "組合", "連合", "集団", "社", "軍", "航空", "商事", "電機", "電鉄", "製薬", "新聞", "出版",
    "球団", "高校", "学園", "高等学校", "中学校", "小学校", "グループ", "ホールディングス", "機構", "連盟", "クラブ",
    "fc", "団", "幕府", "公団", "公社", "局", "本部", "艦隊", "部隊", "航空隊", "楽団", "電力", "証券", "製菓", "機関", "リーグ",
)  # fmt: skip
_ORG_PREFIX_JA = (
    "株式会社",
    "有限会社",
    "合同会社",
    "一般社団法人",
    "公益財団法人",
    "学校法人",
    "独立行政法人",
)
_PLACE_SUFFIX_JA = (
    "市", "県", "町", "村", "区", "郡", "州", "都", "府", "道", "国", "駅", "港", "空港", "城", "寺", "神社", "公園",
    "島", "山", "川", "湖", "橋", "通り", "ホール", "劇場", "球場", "競技場", "スタジアム", "タワー", "館",
)  # fmt: skip
_EVENT_SUFFIX_JA = (
    "事件", "震災", "戦争", "作戦", "選手権", "大会", "賞", "の乱", "会戦", "紛争", "条約", "議定書", "宣言", "憲章",
    "博覧会", "五輪", "祭", "杯", "カップ", "グランプリ", "フェスティバル",
)  # fmt: skip
# A Japanese compound's ending and the type it gives (the three lists share no ending).
_HEAD_ENDINGS = {
    **{e: PLACE for e in _PLACE_SUFFIX_JA},
    **{e: ORGANIZATION for e in _ORG_SUFFIX_JA},
    **{e: OTHER for e in _EVENT_SUFFIX_JA},
}
_KATAKANA_OR_LATIN = re.compile(r"[\u30a0-\u30ffA-Za-z]+")
_ACRONYM_JA = re.compile(r"[A-Z][A-Z0-9&]{1,7}")
_REGION_SUFFIX_JA = ("都", "道", "府", "県", "州", "国")
_PERSON_SUFFIX_JA = frozenset("さん 氏 様 君 ちゃん 殿 ら たち 達".split())
_PROPER_CLASS = {"人名": PERSON, "地名": PLACE, "組織": ORGANIZATION}
_CAP_SEQ = re.compile(
    r"\b(?:[A-Z][\w’'\-]*|[A-Z]{2,})(?:\.?\s+(?:(?:of|de|da|del|von|van|der|du|la|le)\s+)?(?:[A-Z][\w’'\-]*))*"
)
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,6}s?\b")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity mention: normalised key, surface form, type, and the sentence (offsets in the chunk).

    Offsets of -1 mark a document-level mention (from the title).
    """

    key: str
    surface: str
    type: str
    sentence_start: int
    sentence_end: int


class NameSpan(NamedTuple):
    """A name found in an English sentence."""

    name: str  # its words joined by single spaces: the mention's surface
    start: int  # sentence[start:end] is where it is written
    end: int
    rule_type: str  # the word-list rules' type
    titled: bool  # a personal title precedes it ("Dr.", "Queen")


TITLE_NAME_MAX_WORDS = 6  # a longer title in a casing that says nothing is a headline, not a name


# Bumped whenever the rules find or type names differently (an index extracted by older rules is then
# re-extracted by `bench`, and `index info` shows which extraction an index holds).
RULES_REVISION = 2


def extraction_version(typer: SpanTyper | None) -> str:
    rules = f"rules-{RULES_REVISION}"
    return rules if typer is None else f"{rules}+{typer.version}"


def packaged_extraction_version() -> str:
    """What a default `EntityExtractor` records, without building one (no Sudachi dictionary loaded)."""
    return extraction_version(packaged_typer())


def casing_informative(text: str) -> bool:
    """Whether letter case can tell names apart in `text`: it has both upper- and lower-case letters.

    All-capitals (OCR, telegrams, old reports) and all-lower-case text (chat, notes, preprocessed datasets)
    do not; capitalisation rules there find either nothing or whole sentences.
    """
    has_upper = has_lower = False
    for c in text:
        if c.isupper():
            has_upper = True
        elif c.islower():
            has_lower = True
        if has_upper and has_lower:
            return True
    return False


def normalize_name(name: str) -> str:
    name = unicodedata.normalize("NFKC", name).strip()
    name = re.sub(r"['’][sS]$", "", name)
    return re.sub(r"\s+", " ", name).lower()


class EntityExtractor:
    """Finds and types entity mentions.

    Args:
        analyzer: the index's analyzer (its Sudachi tokenizer reads Japanese).
        typer: types English names; the packaged model when not given.
        rules_only: type English names by the word-list rules alone (what fitting the model starts from).
    """

    def __init__(
        self, analyzer: Analyzer, typer: SpanTyper | None = None, *, rules_only: bool = False
    ) -> None:
        self._analyzer = analyzer
        self._typer = None if rules_only else (typer or packaged_typer())

    @property
    def version(self) -> str:
        """What finds and types the mentions: the rules' revision, and the typer's weights when it types
        English names ("rules-2+typer-" and a digest of them). An index records it (`index regraph
        --reextract` brings one extracted by another up to date)."""
        return extraction_version(self._typer)

    def extract(self, text: str) -> list[Mention]:
        """Mentions per sentence of `text`, in order."""
        out: list[Mention] = []
        for start, end in split_sentences(text):
            sentence = text[start:end]
            if has_japanese(sentence):
                found = self.japanese(sentence)
            elif casing_informative(sentence):
                found = self._english(unicodedata.normalize("NFKC", sentence))
            else:
                continue
            out.extend(Mention(normalize_name(s), s, t, start, end) for s, t in found)
        return _resolve_aliases(out)

    def extract_title(self, title: str) -> list[Mention]:
        """Entities named by a document title, as document-level mentions (sentence offsets -1).

        A title names what its document is about, so its entities relate to every entity of the document,
        as a link does in a wiki. A title's first word is not skipped as a sentence start would be.
        """
        if not title.strip():
            return []
        if has_japanese(title):
            found = self.japanese(title)
            if not found and len(title) <= 20:
                found = [(title.strip(), OTHER)]
        else:
            found = self._english_title(unicodedata.normalize("NFKC", title).strip())
        return [Mention(normalize_name(s), s, t, -1, -1) for s, t in found]

    def _english_title(self, text: str) -> list[tuple[str, str]]:
        if casing_informative(text):
            return self._english(text, title_case=True)
        # No case to read names from: a short title names its subject, without a trailing disambiguation
        # ("scott howell (political consultant)"), as capitalisation would read it.
        text = _DISAMBIGUATION.sub("", text)
        if len(text) < 2 or len(text.split()) > TITLE_NAME_MAX_WORDS:
            return []
        if self._typer is None:
            return [(text, OTHER)]
        return [(text, self._typer.type_of(span_features(text, 0, len(text), OTHER, casing=False)))]

    def _english(self, sentence: str, title_case: bool = False) -> list[tuple[str, str]]:
        found = []
        for span in self.english_spans(sentence, title_case):
            kind = span.rule_type
            # A personal title ("Dr.", "Queen") says person more surely than anything the typer reads.
            if self._typer is not None and not span.titled:
                kind = self._typer.type_of(span_features(sentence, span.start, span.end, kind, casing=True))
            found.append((span.name, kind))
        return found

    def english_spans(self, sentence: str, title_case: bool = False) -> list[NameSpan]:
        """Capitalised names in an English sentence, with the rules' type."""
        found: list[NameSpan] = []
        for match in _CAP_SEQ.finditer(sentence):
            words = [
                w.rstrip(".") if w.rstrip(".").lower() in _TITLES_EN else w for w in match.group().split()
            ]
            # Drop leading function words capitalised only because they start the sentence.
            while words and words[0].lower() in _NOT_NAMES:
                words = words[1:]
            if not words:
                continue
            title = words[0].rstrip(".").lower() in _TITLES_EN and len(words) > 1
            if title:
                words = words[1:]
            phrase = " ".join(words).rstrip(".,;:")
            if len(phrase) < 2 or phrase.lower() in ENGLISH_STOPWORDS:
                continue
            begin = match.start() + match.group().find(words[0])
            at_start = sentence[:begin].strip() == "" or sentence[:begin].rstrip().endswith(('"', "(", "“"))
            if at_start and not title_case and len(words) == 1 and not _ACRONYM.fullmatch(phrase):
                continue  # a lone capitalised first word is usually just the start of a sentence
            # Where the name is written: the match less what was dropped before it ("The", a title) and
            # after it (closing punctuation).
            end = match.end() - (len(match.group().rstrip()) - len(match.group().rstrip().rstrip(".,;:")))
            end = max(end, begin + 1)
            found.append(NameSpan(phrase, begin, end, self.rule_type(words, sentence[:begin], title), title))
        return found

    @staticmethod
    def rule_type(words: list[str], before: str, title: bool) -> str:
        lowered = [w.lower().rstrip(".,") for w in words]
        if lowered[-1] in _ORG_SUFFIX_EN or (lowered[0] in _ORG_SUFFIX_EN and "of" in lowered):
            return ORGANIZATION
        if title:
            return PERSON
        if lowered[-1] in _EVENT_SUFFIX_EN:
            return OTHER
        previous = before.rstrip().split()[-1].lower() if before.strip() else ""
        if previous in _PLACE_PREP:
            return PLACE
        if 2 <= len(words) <= 3 and all(w[:1].isupper() and w[1:].islower() for w in words):
            return PERSON
        return OTHER

    def japanese(self, sentence: str) -> list[tuple[str, str]]:
        """Names in a Japanese sentence, with their types."""
        found: list[tuple[str, str]] = []
        run: list[tuple[str, tuple[str, ...]]] = []

        def flush(honorific: bool = False) -> None:
            # A verbal noun after a name is what the name did ("...主演", "...移籍"), not part of it.
            while run and (run[-1][0] == "・" or (run[-1][1][2] == "サ変可能" and not _head_type(run))):
                run.pop()
            if run and any(pos[1] == "固有名詞" for _s, pos in run):
                surface = "".join(s for s, _p in run)
                if len(surface) >= 2:
                    found.append((surface, PERSON if honorific else _japanese_type(run)))
            run.clear()

        for surface, _norm, pos, _b, _e in self._analyzer.japanese.morphemes(sentence):
            noun = pos[0] == "名詞" and pos[1] in ("固有名詞", "普通名詞") and pos[2] != "副詞可能"
            if pos[0] == "接尾辞" and surface in _PERSON_SUFFIX_JA:
                flush(honorific=bool(run) and run[-1][1][2] == "人名")  # "田中さん", "豊田らが"
            elif surface == "・" and run:
                run.append((surface, pos))  # katakana names: "ノーマン・フォスター"
            elif noun and run and _place_boundary(run, pos):
                flush()  # an address: "埼玉県" then "久喜市", two places
                run.append((surface, pos))
            elif noun or (pos[0] == "接尾辞" and run):
                run.append((surface, pos))
            else:
                flush()
        flush()
        return found


def _place_boundary(run: list[tuple[str, tuple[str, ...]]], pos: tuple[str, ...]) -> bool:
    last_surface, last = run[-1]
    return last[2] == "地名" and pos[2] == "地名" and last_surface.endswith(_REGION_SUFFIX_JA)


def _head_type(run: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """A Japanese compound's type from its last element, its head ("...放送" a broadcaster, "...市" a city)."""
    surface = "".join(s for s, _p in run).lower()
    if len(run) < 2 and run[-1][1][2] == "人名":
        return None  # a personal name's own ending ("中山" is a surname, not a mountain)
    # The longest ending decides: "八坂神社" ends in "社" (a company) and in "神社" (a shrine, a place).
    ending = max((e for e in _HEAD_ENDINGS if surface.endswith(e)), key=len, default=None)
    if ending is not None:
        return _HEAD_ENDINGS[ending]
    if surface.startswith(_ORG_PREFIX_JA):
        return ORGANIZATION
    if _ACRONYM_JA.fullmatch(run[0][0]) and len(run) == 1:
        return ORGANIZATION  # "NHK", "FIFA", "OECD" in Japanese text
    return None


def _japanese_type(run: list[tuple[str, tuple[str, ...]]]) -> str:
    head = _head_type(run)
    if head is not None:
        return head
    last = run[-1][1]
    if last[1] == "固有名詞" and last[2] in _PROPER_CLASS:
        return _PROPER_CLASS[last[2]]
    if any(pos[2] == "地名" for _s, pos in run[:-1]) and _KATAKANA_OR_LATIN.fullmatch(run[-1][0]):
        return ORGANIZATION  # a place and then a foreign name: a team, a company ("千葉ロッテマリーンズ")
    proper = [pos for _s, pos in run if pos[1] == "固有名詞"]
    kinds = {pos[2] for pos in proper}
    if "人名" in kinds:
        return PERSON
    if "組織" in kinds:
        return ORGANIZATION
    if "地名" in kinds:
        return PLACE
    return OTHER


def _resolve_aliases(mentions: list[Mention]) -> list[Mention]:
    """A lone surname ("Curie") or given-name-less form refers to the full name met in the same text."""
    people = [m for m in mentions if m.type == PERSON and " " in m.key]
    by_last: dict[str, Mention] = {}
    for m in people:
        by_last.setdefault(m.key.rsplit(" ", 1)[1], m)
    out = []
    for m in mentions:
        full = by_last.get(m.key) if " " not in m.key else None
        if full is not None and full.key != m.key:
            out.append(Mention(full.key, m.surface, PERSON, m.sentence_start, m.sentence_end))
        else:
            out.append(m)
    return out
