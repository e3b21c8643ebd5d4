"""Japanese names by head-final rules over Sudachi's morphemes: runs of nouns that hold a proper noun or end in
a name-forming head (…大学, …市, …事件), typed by that head, with what relates to a name after it cut off
(…戦, …側, …間). The Japanese tagger (`ja_tagger`) reads these names with the sentence and keeps or bounds
them; `entities.EntityExtractor` uses both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hybridrag.indexing.analysis.entity_types import ORGANIZATION, OTHER, PERSON, PLACE
from hybridrag.indexing.analysis.ja_tagger import Morpheme

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
# After a place's name, "person" and "people": its people or its residents ("日本人", "ロシア人", "東京都民").
_PEOPLE_AFTER_PLACE_JA = ("人", "民")


def japanese_rules(sentence: str, morphemes: Sequence[Morpheme]) -> list[tuple[str, str]]:
    """Names in a Japanese sentence by the head-final rules, with their types, from its morphemes."""
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

    for i, (surface, _norm, pos, _b, _e) in enumerate(morphemes):
        noun = pos[0] == "名詞" and pos[1] in ("固有名詞", "普通名詞") and pos[2] != "副詞可能"
        if surface == "の" and run and i + 1 < len(morphemes) and morphemes[i + 1][0] in _EVENT_AFTER_NO_JA:
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


def people_of_places(names: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """`names` with a place's people typed `other`: a name the rules or the tagger type as a place and that
    ends in "人" or "民" names a nationality or a place's residents ("日本人", "ロシア人", "東京都民"), as an
    English nationality ("Japanese") does, which is `other`; typed a place, it would satisfy a place filter.
    Sudachi writes "日本人" as one common noun, so the tagger's reading of e5's pieces is what finds it, and
    types it a place (17 names on the Japanese dev file, none of them a gold name)."""
    return [
        (surface, OTHER if kind == PLACE and surface.endswith(_PEOPLE_AFTER_PLACE_JA) else kind)
        for surface, kind in names
    ]
