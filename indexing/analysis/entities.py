"""Entity extraction with no LLM and no model download.

* Japanese: Sudachi part-of-speech. Runs of nouns holding a proper noun, or ending in a name-forming head
  (省, 党, 航空…) after words of their own, become one entity; the type comes from the dictionary (人名
  person, 地名 place, 組織 organization) or from the head (大学, 銀行… an organisation; 市, 駅… a place).
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from hybridrag.indexing.analysis.analyzers import ENGLISH_STOPWORDS, Analyzer
from hybridrag.indexing.analysis.ja_tagger import JapaneseTagger, Morpheme, packaged_japanese_tagger
from hybridrag.indexing.analysis.name_tagger import NameTagger, Tag, packaged_tagger
from hybridrag.indexing.analysis.span_typer import (
    TOKEN_PATTERN,
    SpanTyper,
    case_free_longest,
    case_free_names,
    ordinary_words,
    packaged_lexicon,
    packaged_typer,
    span_features,
)
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
    (
        "prize award awards war wars act treaty protocol test games olympics revolution restoration conference "
        "championship championships cup festival expedition crisis massacre rebellion uprising battle "
        # and things made or found: machines, systems, results named after someone
        "engine engines machine machines system theorem equation algorithm principle effect paradox "
        "hypothesis conjecture syndrome"
    ).split()
)
# A name ending in one of these is a place: natural features, settlements and buildings.
_PLACE_SUFFIX_EN = frozenset(
    (
        "island islands isle river creek canal bridge lake lakes bay mount mountain mountains hill hills valley "
        "palace castle park street road avenue square county province prefecture district region peninsula "
        "ocean sea gulf strait harbour harbor airport station desert forest falls beach coast cathedral abbey "
        "tower stadium arena village town city borough parish glacier reservoir canyon"
    ).split()
)
_PLACE_PREFIX_EN = frozenset("mount lake cape fort port isle".split())
_SEQUEL = re.compile(r"^(?:[ivxl]+|\d+)$")  # "World War II", "Apollo 13"
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
    "球団", "高校", "中学", "学園", "高等学校", "中学校", "小学校", "グループ", "ホールディングス", "機構", "連盟", "クラブ",
    "fc", "団", "幕府", "公団", "公社", "局", "本部", "艦隊", "部隊", "航空隊", "楽団", "電力", "証券", "政権", "裁判所", "製菓", "機関", "リーグ",
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
    "神宮", "運河", "公会堂", "飛行場", "競馬場", "競輪場", "基地", "温泉", "地方", "海岸", "連邦", "海峡", "道路",
    "センター", "要塞", "本宮",
)  # fmt: skip
_EVENT_SUFFIX_JA = (
    "事件", "震災", "戦争", "作戦", "選手権", "大会", "賞", "の乱", "会戦", "紛争", "条約", "議定書", "宣言", "憲章",
    "の戦い", "の変", "の役", "の陣", "大戦", "選挙", "革命", "裁判", "まつり",
    "博覧会", "五輪", "祭", "杯", "カップ", "グランプリ", "フェスティバル", "オリンピック", "トーナメント",
)  # fmt: skip
# A Japanese compound's ending and the type it gives (the three lists share no ending).
_HEAD_ENDINGS = {
    **{e: PLACE for e in _PLACE_SUFFIX_JA},
    **{e: ORGANIZATION for e in _ORG_SUFFIX_JA},
    **{e: OTHER for e in _EVENT_SUFFIX_JA},
}
# After a name, words that relate to it without being part of it: a match against it ("…ボーンマス戦"),
# its side ("IBM側"), the way between ("門司駅間"), inside it ("キューバ国内"), "and others" ("トーメン等").
_RELATION_AFTER_JA = frozenset("戦 側 間 国内 等 内".split())
# "Xの戦い", "Xの乱": an event named by its place or era, the particle inside the name.
_EVENT_AFTER_NO_JA = frozenset(("戦い", "乱", "変", "役", "陣"))
_KATAKANA_OR_LATIN = re.compile(r"[\u30a0-\u30ffA-Za-z]+")
_KANJI = re.compile(r"[\u4e00-\u9fff々]+")
_ACRONYM_JA = re.compile(r"[A-Z][A-Z0-9&]{1,7}")
_PERSON_SUFFIX_JA = frozenset("さん 氏 様 君 ちゃん 殿 ら たち 達 家".split())  # 家: "伊藤家", the family
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z.'\-]*")
# Titles and occupations written after a surname ("岡田社長", "サッチャー首相"): not part of the name.
_TITLES_JA = frozenset(
    "首相 大統領 社長 監督 選手 会長 議員 知事 市長 町長 村長 教授 博士 夫人 王 皇帝 将軍 元帥 大使 長官 大臣 総裁 "
    "代表 主席 総理 投手 捕手 内野手 外野手 容疑者 被告 記者 委員長 議長 理事長 校長 院長 所長 部長 課長 店長 艦長 "
    "隊長 団長 司令官 作家 画家 漫画家 俳優 女優 歌手 作曲家 副大統領 首席 書記 書記長 中将 少将 大将 大佐 中佐 少佐 "
    "大尉 中尉 少尉 元首 天皇 皇后 皇太子 親王 殿下 陛下 法王 教皇 師 先生 弁護士 医師 主将 騎手 棋士 横綱 大関 関脇".split()
)
_PROPER_CLASS = {"人名": PERSON, "地名": PLACE, "組織": ORGANIZATION}
_CAP_SEQ = re.compile(
    r"\b(?:[A-Z][\w’'\-]*|[A-Z]{2,})(?:\.?\s+(?:(?:of|de|da|del|von|van|der|du|la|le)\s+)?(?:[A-Z][\w’'\-]*))*"
)
DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,6}s?\b")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity mention: normalised key, surface form, type, and the sentence (offsets in the chunk).

    Offsets of -1 mark a document-level mention (from the title). A `node_only` mention links its name in
    the graph but claims no type for its chunk: the Japanese rules' reading of a name that the tagger bounded
    otherwise (`JapaneseTagger.read`).
    """

    key: str
    surface: str
    type: str
    sentence_start: int
    sentence_end: int
    node_only: bool = False


def chunk_types(mentions: Iterable[Mention]) -> list[str]:
    """The entity types a chunk is filtered by: those its typed mentions claim (sorted)."""
    return sorted({m.type for m in mentions if not m.node_only})


class NameSpan(NamedTuple):
    """A name found in an English sentence."""

    name: str  # its words joined by single spaces: the mention's surface
    start: int  # sentence[start:end] is where it is written
    end: int
    rule_type: str  # the word-list rules' type
    titled: bool  # a personal title precedes it ("Dr.", "Queen")
    known: bool = False  # its own words settle its type (`EntityExtractor.sure_type`)


TITLE_NAME_MAX_WORDS = 6  # a longer title in a casing that says nothing is a headline, not a name


# Bumped whenever the rules find or type names differently (an index extracted by older rules is then
# re-extracted by `bench`, and `index info` shows which extraction an index holds).
RULES_REVISION = 9
# Tags below this mean probability are left out: the tagger, fitted on WikiANN's name-dense fragments, also
# tags ordinary noun phrases. On the English dev file lower-cased (typed F1): all tags 0.474, >= 0.6 0.518,
# >= 0.7 0.540, >= 0.8 0.548. In text with letter case the capitalisation rules and the span typer stay: the
# tagger typing their names reached 0.649 against 0.606 at ~280 sentences/s, a build ~20x slower than the
# rules (SciFact), so it reads only the sentences the rules cannot.
TAG_MIN_CONFIDENCE = 0.75
_WORD_RUN = re.compile(r"[^\W\d_]{2,}")  # two letters in a row


def extraction_version(
    typer: SpanTyper | None, tagger: NameTagger | None = None, japanese: JapaneseTagger | None = None
) -> str:
    parts = [f"rules-{RULES_REVISION}"]
    parts += [typer.version] if typer is not None else []
    parts += [tagger.version] if tagger is not None else []
    parts += [japanese.version] if japanese is not None else []
    return "+".join(parts)


def packaged_extraction_version() -> str:
    """What a default `EntityExtractor` records, without building one (no Sudachi dictionary loaded)."""
    return extraction_version(packaged_typer(), packaged_tagger(), packaged_japanese_tagger(RULES_REVISION))


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
        tagger: finds and types English names from their sentence (`name_tagger`); the packaged one when
            not given and installed.
        japanese: finds and types Japanese names from the rules' names and the morphemes (`ja_tagger`);
            the packaged one when not given and installed.
        rules_only: name entities by the rules alone (what fitting the models starts from).
    """

    def __init__(
        self,
        analyzer: Analyzer,
        typer: SpanTyper | None = None,
        tagger: NameTagger | None = None,
        japanese: JapaneseTagger | None = None,
        *,
        rules_only: bool = False,
    ) -> None:
        self._analyzer = analyzer
        self._typer = None if rules_only else (typer or packaged_typer())
        self._tagger = None if rules_only else (tagger or packaged_tagger())
        self._japanese = None if rules_only else (japanese or packaged_japanese_tagger(RULES_REVISION))

    @property
    def version(self) -> str:
        """What finds and types the mentions: the rules' revision, the typer's weights when it types
        English names, the tagger's when it reads English without letter case and the Japanese tagger's
        ("rules-9+typer-…+tagger-…+ja-…", digests of the weights). An index records it (`index regraph
        --reextract` brings one extracted by another up to date)."""
        return extraction_version(self._typer, self._tagger, self._japanese)

    def extract(self, text: str) -> list[Mention]:
        """Mentions per sentence of `text`, in order."""
        return self.extract_many([text])[0]

    def extract_many(self, texts: Sequence[str]) -> list[list[Mention]]:
        """`extract` of each text; the tagger reads their sentences without letter case together, in
        batches (sentences with letter case never reach it: see `TAG_MIN_CONFIDENCE`)."""
        plan: list[list[tuple[int, int, str, str]]] = []
        caseless: list[str] = []
        for text in texts:
            sentences = []
            for start, end in split_sentences(text):
                sentence = text[start:end]
                how = "japanese" if has_japanese(sentence) else "cased"
                if how == "cased":
                    sentence = unicodedata.normalize("NFKC", sentence)
                    if not casing_informative(sentence):
                        how = "caseless"
                        # Numbers and punctuation between sentences ("561.", "3).") name nothing.
                        if _WORD_RUN.search(sentence):
                            caseless.append(sentence)
                sentences.append((start, end, sentence, how))
            plan.append(sentences)
        unique = list(dict.fromkeys(caseless))  # a repeated sentence is read once
        tagged = dict(zip(unique, self._tagger.tag(unique), strict=True)) if self._tagger is not None else {}
        out = []
        for sentences in plan:
            mentions: list[Mention] = []
            for start, end, sentence, how in sentences:
                if how == "japanese":
                    mentions.extend(self._japanese_mentions(sentence, start, end))
                    continue
                if how == "cased":
                    found = self._english(sentence)
                else:
                    found = self._case_free(sentence, tagged.get(sentence, ()))
                mentions.extend(Mention(normalize_name(s), s, t, start, end) for s, t in found)
            out.append(_resolve_aliases(mentions))
        return out

    def extract_title(self, title: str) -> list[Mention]:
        """Entities named by a document title, as document-level mentions (sentence offsets -1).

        A title names what its document is about, so its entities relate to every entity of the document,
        as a link does in a wiki. A title's first word is not skipped as a sentence start would be.
        """
        if not title.strip():
            return []
        if has_japanese(title):
            mentions = self._japanese_mentions(title, -1, -1)
            if not mentions and len(title) <= 20:
                mentions = [Mention(normalize_name(title.strip()), title.strip(), OTHER, -1, -1)]
            return mentions
        found = self._english_title(unicodedata.normalize("NFKC", title).strip())
        return [Mention(normalize_name(s), s, t, -1, -1) for s, t in found]

    def _case_free(self, sentence: str, tags: Sequence[Tag]) -> list[tuple[str, str]]:
        """Names in a sentence whose letter case says nothing: those the lexicon knows (countries, regions,
        languages, nationalities, religions; the longest match at each word), and the tagger's sure names
        that overlap none and are not a word the lexicon knows as ordinary English too ("ate turkey")."""
        known = _lexicon_spans(sentence)
        found = [(sentence[s:e], kind) for s, e, kind in known]
        ordinary = ordinary_words()
        for tag in tags:
            name = sentence[tag.start : tag.end]
            if (
                tag.confidence >= TAG_MIN_CONFIDENCE
                and name.lower() not in ordinary
                and not any(s < tag.end and tag.start < e for s, e, _k in known)
            ):
                found.append((name, tag.type))
        return found

    def _english_title(self, text: str) -> list[tuple[str, str]]:
        if casing_informative(text):
            return self._english(text, title_case=True)
        # No case to read names from: a short title names its subject, without a trailing disambiguation
        # ("scott howell (political consultant)"), as capitalisation would read it.
        text = DISAMBIGUATION.sub("", text)
        if len(text) < 2 or len(text.split()) > TITLE_NAME_MAX_WORDS:
            return []
        known = packaged_lexicon().get(text.lower())
        if known is not None or self._typer is None:
            return [(text, known or OTHER)]
        return [(text, self._typer.type_of(span_features(text, 0, len(text), OTHER, casing=False)))]

    def _english(self, sentence: str, title_case: bool = False) -> list[tuple[str, str]]:
        found = []
        for span in self.english_spans(sentence, title_case):
            kind = span.rule_type
            # A personal title ("Dr.", "Queen") says person, and a name the lexicon knows says its type,
            # more surely than anything the typer reads.
            if self._typer is not None and not span.titled and not span.known:
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
            sure = self.sure_type(words)
            kind = sure if sure is not None else self._context_type(words, sentence[:begin], title)
            found.append(NameSpan(phrase, begin, end, kind, title, sure is not None))
        return found

    @staticmethod
    def sure_type(words: list[str]) -> str | None:
        """The type a name's own words settle: the lexicon knows the whole name (a country, a language, a
        nationality), or its head word says what it is ("... University", "... War II", "... Bridge")."""
        lowered = [w.lower().rstrip(".,") for w in words]
        known = packaged_lexicon().get(" ".join(lowered))
        if known is not None:
            return known
        if lowered[-1] in _ORG_SUFFIX_EN or (lowered[0] in _ORG_SUFFIX_EN and "of" in lowered):
            return ORGANIZATION
        head = lowered[-2] if len(lowered) > 1 and _SEQUEL.match(lowered[-1]) else lowered[-1]
        if head in _EVENT_SUFFIX_EN:
            return OTHER
        if lowered[-1] in _PLACE_SUFFIX_EN or (len(lowered) > 1 and lowered[0] in _PLACE_PREFIX_EN):
            return PLACE
        return None

    @classmethod
    def rule_type(cls, words: list[str], before: str, title: bool) -> str:
        sure = cls.sure_type(words)
        return sure if sure is not None else cls._context_type(words, before, title)

    @staticmethod
    def _context_type(words: list[str], before: str, title: bool) -> str:
        """The rules' type where a name's own words settle none: a title, a preceding place preposition,
        the shape of a personal name."""
        if title:
            return PERSON
        previous = before.rstrip().split()[-1].lower() if before.strip() else ""
        if previous in _PLACE_PREP:
            return PLACE
        if 2 <= len(words) <= 3 and all(w[:1].isupper() and w[1:].islower() for w in words):
            return PERSON
        return OTHER

    def japanese(self, sentence: str) -> list[tuple[str, str]]:
        """Names in a Japanese sentence, with their types: the Japanese tagger's reading of the rules' names
        (the rules' alone without it)."""
        return self._japanese_names(sentence)[0]

    def _japanese_names(self, sentence: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """`japanese`'s names, and the rules' names the tagger did not keep (graph nodes only)."""
        morphemes = self._analyzer.japanese.morphemes(sentence)
        names = self.japanese_rules(sentence, morphemes)
        return (names, []) if self._japanese is None else self._japanese.read(sentence, morphemes, names)

    def _japanese_mentions(self, sentence: str, start: int, end: int) -> list[Mention]:
        names, nodes = self._japanese_names(sentence)
        return [Mention(normalize_name(s), s, t, start, end) for s, t in names] + [
            Mention(normalize_name(s), s, t, start, end, node_only=True) for s, t in nodes
        ]

    def japanese_rules(
        self, sentence: str, morphemes: Sequence[Morpheme] | None = None
    ) -> list[tuple[str, str]]:
        """Names in a Japanese sentence by the head-final rules, with their types (`morphemes`: the
        sentence's, when already read)."""
        found: list[tuple[str, str]] = []
        run: list[tuple[str, tuple[str, ...]]] = []

        def flush(honorific: bool = False) -> None:
            # A verbal noun after a name is what the name did ("...主演", "...移籍"), not part of it.
            while run and (
                run[-1][0] == "・"
                or run[-1][1][0] == "空白"
                or (run[-1][1][2] == "サ変可能" and not _head_type(run))
                or (len(run) > 1 and run[-1][0] in _RELATION_AFTER_JA)
            ):
                run.pop()
            if run and (any(pos[1] == "固有名詞" for _s, pos in run) or _common_named(run)):
                head = _head_type(run)
                name = run if head else _proper_core(run)
                surface = "".join(s for s, _p in name)
                if len(surface) >= 2:
                    found.append((surface, PERSON if honorific else head or _japanese_type(name)))
            run.clear()

        if morphemes is None:
            morphemes = self._analyzer.japanese.morphemes(sentence)
        for i, (surface, _norm, pos, _b, _e) in enumerate(morphemes):
            noun = pos[0] == "名詞" and pos[1] in ("固有名詞", "普通名詞") and pos[2] != "副詞可能"
            if (
                surface == "の"
                and run
                and i + 1 < len(morphemes)
                and morphemes[i + 1][0] in _EVENT_AFTER_NO_JA
            ):
                run.append((surface, pos))  # a battle or a rebellion named by its place: "関ヶ原の戦い"
            elif pos[0] == "接尾辞" and surface in _PERSON_SUFFIX_JA:
                flush(honorific=bool(run) and run[-1][1][2] == "人名")  # "田中さん", "豊田らが"
            elif surface == "・" and run:
                if _KATAKANA_OR_LATIN.fullmatch(run[-1][0]):
                    run.append((surface, pos))  # katakana names: "ノーマン・フォスター"
                else:
                    flush()  # a list: "フランスのミッテラン大統領・イギリスのサッチャー首相"
            elif pos[0] == "空白" and run and _LATIN_WORD.fullmatch(run[-1][0]):
                run.append((surface, pos))  # between Latin words: "Peter Paul Brauer" is one name
            elif noun or (pos[0] == "接尾辞" and run):
                if run and run[-1][1][0] == "空白" and not _LATIN_WORD.fullmatch(surface):
                    flush()
                run.append((surface, pos))
            else:
                flush()
        flush()
        return found


def _common_named(run: list[tuple[str, tuple[str, ...]]]) -> bool:
    """Whether a run of common nouns names something by its head ending: "国防省", "自由民主党",
    "ノースウェスト航空" hold no proper noun in Sudachi's dictionary, yet their ending (a ministry, a party,
    an airline) and the words before it make a name; "同社" (one word), "各省" (a generic first word) do not."""
    if len(run) < 2 or run[0][0] in _GENERIC_JA or _head_type(run) is None:
        return False
    surface = "".join(s for s, _p in run).lower()
    ending = max((e for e in _HEAD_ENDINGS if surface.endswith(e)), key=len, default="")
    return len(surface) - len(ending) >= 2


# First words that make a compound generic ("同社" that company, "各省" every ministry, "地元企業").
_GENERIC_JA = frozenset(
    "同 本 各 当 子 親 前 元 旧 新 全 両 他 某 大手 地元 自 我が 現 次 同じ 各地 地方 一部 中央 国内 海外 外国 "
    "民間".split()
)


def _proper_core(run: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    """A run of nouns without a name-forming ending, less the kanji common nouns that describe a person or a
    place named inside it ("地元中国", "日本企業", "サッチャー首相", "軍人エフィム・…"). Katakana and Latin
    words stay (they are most often part of the name: "東京オリンピック", "サンフランシスコ・ジャイアンツ"),
    and so do the words around an organisation's name ("共産党文化部")."""
    proper = [i for i, (_s, pos) in enumerate(run) if pos[1] == "固有名詞"]
    first, last = proper[0], proper[-1]
    first_name, last_name = run[first][1], run[last][1]
    while first > 0 and _part_of_name(run, first - 1, first_name):
        first -= 1
    while last < len(run) - 1 and _part_of_name(run, last + 1, last_name):
        last += 1
    return run[first : last + 1]


def _part_of_name(run: list[tuple[str, tuple[str, ...]]], i: int, name: tuple[str, ...]) -> bool:
    """Whether run[i] belongs to the proper noun `name` next to it: not a kanji common noun around a person or
    a place. After a surname, kanji the dictionary does not know as a given name are one ("徐" "平"), a
    title is not ("岡田" "社長")."""
    surface, pos = run[i]
    if pos[1] != "普通名詞" or name[2] not in ("人名", "地名") or not _KANJI.fullmatch(surface):
        return True
    return name[3:4] == ("姓",) and i > 0 and run[i - 1][1] == name and surface not in _TITLES_JA


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


def _lexicon_spans(sentence: str) -> list[tuple[int, int, str]]:
    """Where the lexicon's names are in `sentence`, read without letter case: the longest at each word."""
    names, longest = case_free_names(), case_free_longest()
    words = [(m.start(), m.end(), m.group().lower()) for m in TOKEN_PATTERN.finditer(sentence)]
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            kind = names.get(tuple(w for _s, _e, w in words[i : i + n]))
            if kind is not None:
                found.append((words[i][0], words[i + n - 1][1], kind))
                i += n
                break
        else:
            i += 1
    return found


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
            out.append(replace(m, key=full.key, type=PERSON))
        else:
            out.append(m)
    return out
