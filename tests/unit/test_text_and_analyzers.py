"""Sentence splitting, chunk offsets, language detection and keyword analysis in both languages."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from hybridrag.indexing.analysis.analyzers import Analyzer, japanese_bigrams
from hybridrag.indexing.analysis.text import chunk_text, content_hash, detect_language, split_sentences

ANALYZER = Analyzer()


def test_japanese_sentences_end_at_kuten() -> None:
    text = "東京大学の山田教授は研究を始めた。次の年に論文を発表した！本当か？"
    spans = split_sentences(text)
    assert [text[s:e] for s, e in spans] == [
        "東京大学の山田教授は研究を始めた。",
        "次の年に論文を発表した！",
        "本当か？",
    ]


def test_english_sentences_keep_abbreviations() -> None:
    text = "Dr. Smith met Mr. J. Doe in Tokyo. They agreed (e.g. on terms) at 3.5 percent! Why?"
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == [
        "Dr. Smith met Mr. J. Doe in Tokyo.",
        "They agreed (e.g. on terms) at 3.5 percent!",
        "Why?",
    ]


def test_a_lower_case_initial_ends_no_sentence_before_a_lower_case_word() -> None:
    """Text without letter case keeps its initials and abbreviations inside the sentence, as capitals do;
    before a capital, or after a longer word, a stop still ends one."""
    text = (
        "john l. sullivan met the u.s. senate at 2 a.m. and left. it took vitamin c. The end. e. coli grew."
    )
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == [
        "john l. sullivan met the u.s. senate at 2 a.m. and left.",
        "it took vitamin c.",
        "The end.",
        "e. coli grew.",
    ]
    upper = "JOHN L. SULLIVAN MET THE U.S. SENATE. IT ENDED."
    assert [upper[s:e] for s, e in split_sentences(upper)] == [
        "JOHN L. SULLIVAN MET THE U.S. SENATE.",
        "IT ENDED.",
    ]


def test_chunks_are_exact_slices_and_bounded() -> None:
    text = ("Alan Turing worked at Bletchley Park. " * 30) + "湯川秀樹は中間子を予言した。" * 40
    chunks = chunk_text(text, size=200, overlap=50)
    assert len(chunks) > 5
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert len(c.text) <= 200
    assert [c.position for c in chunks] == list(range(len(chunks)))
    # Overlap: each chunk starts before the previous one ended, and the whole text is covered.
    for a, b in itertools.pairwise(chunks):
        assert b.start <= a.end and b.start > a.start
    assert chunks[0].start == 0 and chunks[-1].end == len(text)


def test_a_sentence_longer_than_a_chunk_is_cut() -> None:
    text = "word " * 500
    chunks = chunk_text(text, size=100, overlap=0)
    assert all(len(c.text) <= 100 for c in chunks)
    assert "".join(c.text + " " for c in chunks).split() == text.split()


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab 。.!?\n東京x")), min_size=0, max_size=400))
def test_chunk_offsets_property(text: str) -> None:
    for c in chunk_text(text, size=60, overlap=10):
        assert text[c.start : c.end] == c.text and 0 < len(c.text) <= 60


def test_language_detection() -> None:
    assert detect_language("東京大学の山田太郎教授は研究を始めた。") == "ja"
    assert detect_language("Marie Curie discovered radium in Paris.") == "en"
    assert detect_language("トヨタ (Toyota) は愛知県の自動車メーカーです") == "ja"
    assert detect_language("12345") == "en"
    # Japanese punctuation is no letter; a share of a fifth of the letters makes a text Japanese.
    assert detect_language("・・ 123") == "en"
    assert detect_language("ソニー abcdefghijkl") == "ja" and detect_language("ソニー abcdefghijklm") == "en"
    assert detect_language("The word 漢字 in an English sentence about writing systems.") == "en"


def test_content_hash_is_stable() -> None:
    assert content_hash("a", "b") == content_hash("a", "b") != content_hash("ab", "")


def test_english_analysis_stems_and_drops_stopwords() -> None:
    assert ANALYZER.tokens("The researchers were running studies on Cells") == [
        "research",
        "run",
        "studi",
        "cell",
    ]


def test_japanese_analysis_uses_normalized_forms() -> None:
    tokens = ANALYZER.tokens("東京大学の山田太郎教授は2024年にトヨタ自動車とPythonで共同研究を始めた。")
    assert {
        "東京",
        "大学",
        "山田",
        "太郎",
        "教授",
        "トヨタ",
        "自動車",
        "python",
        "共同",
        "研究",
        "始める",
    } <= set(tokens)
    assert "の" not in tokens and "は" not in tokens and "。" not in tokens


def test_japanese_query_drops_question_and_light_words() -> None:
    assert ANALYZER.tokens("トヨタ自動車を設立したのは誰ですか") == ["トヨタ", "自動車", "設立"]


def test_full_width_and_half_width_agree() -> None:
    assert ANALYZER.tokens("ＰＹＴＨＯＮとＡＩ") == ANALYZER.tokens("PythonとAI")


def test_bigrams() -> None:
    assert japanese_bigrams("東京大学のPython研究") == ["東京", "京大", "大学", "学の", "研究"]
    assert japanese_bigrams("a 京 b") == ["京"]


def test_long_japanese_input_is_tokenized_in_pieces() -> None:
    text = "東京大学の研究者が論文を発表した。" * 4000  # ~68k characters, beyond Sudachi's input limit
    tokens = ANALYZER.tokens(text)
    assert tokens.count("論文") == 4000


def test_remembered_word_tokens_match_fresh_ones_and_the_memory_stays_bounded() -> None:
    from hybridrag.indexing.analysis.analyzers import EnglishAnalyzer

    words = ["Running", "runs", "the", "Don’t", "don't", "CATS", "cats", "Über", "3D", "running", "THE"] * 3
    fresh = [EnglishAnalyzer().normalize_word(w) for w in words]
    small = EnglishAnalyzer(memo_size=4)  # smaller than the words: the memory is emptied and refilled
    for _ in range(3):
        assert small.normalize_words(words) == fresh
        assert [small.normalize_words([w])[0] for w in words] == fresh
        assert len(small._memo) <= len(set(words))
    assert fresh[:4] == ["run", "run", None, None] and fresh[5] == fresh[6] == "cat"


def test_english_tokens_are_each_words_normalized_form_with_stopwords_dropped() -> None:
    """What the keyword index and the queries get: every word (`WORD`) of the NFKC text normalized alone,
    the stopwords left out, whether the words are remembered or not."""
    import unicodedata

    from hybridrag.indexing.analysis.analyzers import WORD, EnglishAnalyzer

    text = "The cats' Running ｆｏｏ don’t IL-6 was 3.5 of the U.S. — and ran; THE End's end"
    words = WORD.findall(unicodedata.normalize("NFKC", text))
    expected = [t for t in (EnglishAnalyzer().normalize_word(w) for w in words) if t]
    analyzer = EnglishAnalyzer()
    assert analyzer.tokens(text) == expected  # none remembered
    assert analyzer.tokens(text) == expected  # all remembered
    assert analyzer.tokens("") == [] and analyzer.normalize_words([]) == []
    assert expected[:3] == ["cat", "run", "foo"]


_SENTENCE_PIECES = [
    *"ab .\n!?。\"')]\t．！？」』）",
    "Mrs.",
    "Fig.",
    "e.g.",
    "i.e.",
    "etc.",
    "vs.",
    "al.",
    "J.",
    "c.",
    "Ab",
]


@given(st.lists(st.sampled_from(_SENTENCE_PIECES), max_size=40).map("".join))
@settings(max_examples=500, deadline=None)
def test_sentence_ends_found_full_stop_first_match_the_reference_pattern(text: str) -> None:
    """The pattern as run (its alternatives behind one leading set of characters, which the engine skips
    to, and the full stop matched before its look-behinds) finds the ends the plain pattern finds."""
    import re

    from hybridrag.indexing.analysis.text import _append_trimmed

    # The pattern before the full stop was matched first (look-behinds tried at every character).
    reference = re.compile(
        r"[。！？!?．]+[」』）)\"']*"
        r"|(?<![A-Z][a-z])(?<!\b[A-Z])(?<!e\.g)(?<!i\.e)(?<!etc)(?<!\bvs)(?<!\bal)(?<!Mrs)(?<!Fig)"
        r"\.[\"')\]]*(?=\s)(?!(?<=\b[a-z]\.)\s+[a-z])"
        r"|\n\s*\n|\n"
    )
    spans: list[tuple[int, int]] = []
    start = 0
    for match in reference.finditer(text):
        _append_trimmed(text, start, match.end(), spans)
        start = match.end()
    _append_trimmed(text, start, len(text), spans)
    assert split_sentences(text) == spans


def test_a_sentence_reads_as_japanese_by_its_grammar_or_its_share_of_japanese_script() -> None:
    from hybridrag.indexing.analysis.text import reads_as_japanese

    # Hiragana (particles, endings) make a sentence Japanese, however many Latin names it holds.
    assert reads_as_japanese("さらに、RodgersInstruments、Soloflex、PizzaSchmizza、ParrLumberの本社がある。")
    assert reads_as_japanese("東京大学の山田太郎教授は研究を始めた。")
    assert reads_as_japanese("東京証券取引所")  # all Japanese script, no hiragana
    # An English sentence quoting a Japanese or Chinese name is English.
    assert not reads_as_japanese(
        "Wangliang (魍魎 or 罔两) is the name of a malevolent spirit in Chinese mythology."
    )
    assert not reads_as_japanese(
        "Flag to Flag, known as Super Speed Racing (スーパースピードレーシング ) in Japan."
    )
    assert not reads_as_japanese("Marie Curie discovered radium in Paris.")
    assert not reads_as_japanese("")


def test_an_english_sentence_quoting_a_chinese_name_gets_its_english_names() -> None:
    """Read as Japanese, such a sentence became one sentence-long name (HotpotQA has 22, WikiNEuRal dev 2)."""
    from hybridrag.indexing.analysis.entities import EntityExtractor

    extractor = EntityExtractor(Analyzer())
    sentence = (
        "Written by Liu Chia-chang ( 劉家昌 ) in the 1970s, it tells of a girl's memories of a loved one."
    )
    names = [m.surface for m in extractor.extract(sentence)]
    assert "Liu Chia-chang" in names and all(len(n) < 30 for n in names)
    japanese = [
        m.surface
        for m in extractor.extract("トヨタ自動車の豊田章男社長がToyota Motor North Americaを訪れた。")
    ]
    assert "トヨタ自動車" in japanese and "豊田章男" in japanese


def test_a_querys_name_forms_follow_the_same_reading_as_passages() -> None:
    """An English question quoting a Chinese name keeps its words (the passages' nodes are "huangfu mi"),
    a Japanese one its morpheme runs."""
    from hybridrag.indexing.stores.graph_index import name_forms_in

    analyzer = Analyzer()
    english = name_forms_in("Who wrote the Records of Emperors and Kings (帝王世纪)?", analyzer)
    # Five words: read as Japanese, their morphemes and spaces made nine, past the n-grams' reach.
    assert "records of emperors and kings" in english and "帝王世纪" in english
    japanese = name_forms_in("豊田佐吉はどこで生まれたか", analyzer)
    assert "豊田佐吉" in japanese and "豊田" in japanese
