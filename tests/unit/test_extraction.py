"""Entity extraction in both languages: names found, bounded and typed, normalised."""

from __future__ import annotations

import pytest

from hybridrag.indexing.analysis.analyzers import Analyzer
from hybridrag.indexing.analysis.entities import EntityExtractor
from hybridrag.indexing.analysis.ja_rules import people_of_places

EXTRACTOR = EntityExtractor(Analyzer())


def entities(text: str) -> dict[str, str]:
    return {m.key: m.type for m in EXTRACTOR.extract(text)}


def test_english_extraction_and_types() -> None:
    got = entities(
        "Marie Curie studied at the University of Paris. In 1898 Curie worked in Warsaw with "
        "Dr. Henri Becquerel and the Radium Institute. The IAEA was founded later."
    )
    assert got["marie curie"] == "person"
    assert got["university of paris"] == "organization"
    assert got["radium institute"] == "organization"
    assert got["warsaw"] == "place"
    assert got["henri becquerel"] == "person"
    assert "iaea" in got
    assert "the" not in got and "in" not in got
    # A lone surname is resolved to the full name met in the same text.
    curie = [m for m in EXTRACTOR.extract("Marie Curie won. Later Curie taught.") if m.surface == "Curie"]
    assert curie and curie[0].key == "marie curie"


def test_japanese_extraction_and_types() -> None:
    got = entities(
        "豊田佐吉は1926年に愛知県刈谷で豊田自動織機製作所を設立した。湯川秀樹は京都大学で研究した。"
    )
    assert got["豊田佐吉"] == "person"
    assert got["湯川秀樹"] == "person"
    assert got["愛知県刈谷"] == "place"  # an address is one place, as named-entity data marks it
    assert got["豊田自動織機製作所"] == "organization"
    assert got["京都大学"] == "organization"
    assert "1926年" not in got


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "ノーマン・フォスターが設計した。",
            {"ノーマン・フォスター": "person"},
        ),  # katakana names across "・"
        (
            "豊田雅孝らが参加し、田中さんも来た。",
            {"豊田雅孝": "person", "田中": "person"},
        ),  # plural, honorific
        ("片岡千恵蔵主演の映画。", {"片岡千恵蔵": "person"}),  # what the name did is not part of it
        ("SBS静岡放送の番組。", {"sbs静岡放送": "organization"}),  # the compound's head decides
        ("ボストン交響楽団が演奏した。", {"ボストン交響楽団": "organization"}),
        ("東日本大震災の後。", {"東日本大震災": "other"}),
        ("株式会社アドバンスコープは。", {"株式会社アドバンスコープ": "organization"}),
        ("FIFAが発表した。", {"fifa": "organization"}),
        (
            "千葉ロッテマリーンズが勝った。",
            {"千葉ロッテマリーンズ": "organization"},
        ),  # a place, then a team's name
        ("アメリカ合衆国の首都。", {"アメリカ合衆国": "place"}),
        ("京都議定書が採択された。", {"京都議定書": "other"}),
        ("中山が打った。", {"中山": "person"}),  # a surname's own ending is no mountain
        ("三宮駅で降りた。", {"三宮駅": "place"}),
        ("八坂神社に参拝した。", {"八坂神社": "place"}),  # the longest ending decides (神社, not 社)
    ],
)
def test_japanese_names_bounded_and_typed_by_their_head(text: str, expected: dict[str, str]) -> None:
    assert entities(text) == expected


def test_a_places_people_are_typed_other_and_nothing_else_moves() -> None:
    names = [
        ("日本人", "place"),
        ("東京都民", "place"),
        ("東京", "place"),
        ("菅直人", "person"),
        ("巨人", "organization"),
    ]
    assert people_of_places(names) == [
        ("日本人", "other"),
        ("東京都民", "other"),
        ("東京", "place"),
        ("菅直人", "person"),  # a given name's own 人
        ("巨人", "organization"),  # a team
    ]


def test_normalisation_merges_width_and_case() -> None:
    a = entities("Ｔｏｋｙｏ Ｔｓｕｓｈｉｎ Ｋｏｇｙｏ was founded.")
    b = entities("Later, TOKYO TSUSHIN KOGYO changed its name.")
    assert "tokyo tsushin kogyo" in a and "tokyo tsushin kogyo" in b
