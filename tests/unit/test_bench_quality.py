"""The benchmark's answer-quality and recall measures."""
from bench.quality import contains, normalize, recall, score, texts, token_f1


def test_normalize_contains_and_f1():
    assert normalize("The  Eiffel, Tower!") == "eiffel tower"
    assert contains("It was built by Gustave Eiffel.", ["gustave eiffel"])
    assert not contains("It was built in Paris.", ["Gustave Eiffel"])
    assert token_f1("Gustave Eiffel built it", ["Gustave Eiffel"]) == 2 * 0.5 * 1.0 / 1.5
    assert token_f1("", ["x"]) == 0.0 and token_f1("no overlap", ["x y"]) == 0.0


def test_recall_finds_a_chunk_of_the_gold_passage():
    gold = "Mark Hunter starts a pirate radio station.\nHe is a loner at school."
    assert recall(["He is a loner at school."], gold)
    assert recall(["Mark   Hunter starts a pirate"], gold)  # whitespace differences do not matter
    assert not recall(["Another story entirely."], gold)
    assert texts([[{"text": "a"}, "b"], "c"]) == ["a", "b", "c"]
    s = score("Mark Hunter", ["He is a loner at school."], ["Mark Hunter"], gold)
    assert s == {"contains": True, "f1": 1.0, "recall": True}
