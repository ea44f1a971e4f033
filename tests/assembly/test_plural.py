"""``assembly.text.plural``: the one way every message, hover, outline and summary writes
a count with its noun (four copies of it disagreed: one wrote "1234 messages", another
"1,234 messages")."""

from assembly.text import plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert plural(1, "token") == "1 token"
    assert plural(0, "token") == "0 tokens"
    assert plural(2, "more line") == "2 more lines"


def test_counts_are_thousands_separated_everywhere() -> None:
    assert plural(1234, "message") == "1,234 messages"


def test_an_irregular_plural_is_given() -> None:
    assert plural(3, "entry", "entries") == "3 entries"
    assert plural(1, "entry", "entries") == "1 entry"
