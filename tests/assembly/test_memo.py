"""``assembly.memo.TextMemo``: least recently used first, bounded in entries and in text."""

from __future__ import annotations

import threading

from assembly.memo import TextMemo


def test_the_least_recently_used_goes_first() -> None:
    memo: TextMemo[str, int] = TextMemo(3, 1_000)
    made: list[str] = []

    def get(key: str) -> int:
        return memo.get(key, lambda: made.append(key) or len(made))

    assert [get("a"), get("b"), get("c"), get("a")] == [1, 2, 3, 1]
    get("d")  # "b" is the least recently used
    assert list(memo) == ["c", "a", "d"] and "b" not in memo
    assert get("b") == 5 and made == ["a", "b", "c", "d", "b"]


def test_the_texts_kept_are_bounded_in_characters() -> None:
    memo: TextMemo[tuple[str, int], str] = TextMemo(10, 10, size=lambda key: len(key[0]))
    for key in (("aaaa", 1), ("bbbb", 2), ("cc", 3)):
        memo.get(key, lambda: "made")
    assert len(memo) == 3  # 4 + 4 + 2 characters
    memo.get(("ddd", 4), lambda: "made")  # 13 characters: the oldest goes
    assert list(memo) == [("bbbb", 2), ("cc", 3), ("ddd", 4)]
    assert memo.get(("x" * 11, 5), lambda: "long") == "long"  # made, never kept
    assert ("x" * 11, 5) not in memo and len(memo) == 3
    memo.clear()
    assert len(memo) == 0


def test_threads_share_one_memo() -> None:
    memo: TextMemo[int, int] = TextMemo(8, 1_000, size=lambda key: 1)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(2_000):
                k = (i * seed) % 20
                assert memo.get(k, lambda k=k: k * k) == k * k
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 3, 7, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(memo) <= 8
