"""How far apart moved instructions and the originals' sentences are (run on demand).

`eval_instructions.py` measures the rule; this measures what any rule built on its
matcher could reach. Every instruction the matcher sends to a section it does not sit in is
a *candidate*: on the unmodified prompts (a right finding when ``LABELS.json`` lists it, a
wrong one otherwise) and in every move of the evaluation (to the top of the prompt and into
an unrelated section; right when the matched section is the one it was moved from). Each
candidate gets the features the rule reads and a few it does not (below), and a logistic
regression, trained on one half of the seen sets (by project, as ``seen_half`` splits them)
and judged on the other, says how well they separate the two. Reported on the judged half:

- the **ceiling**: moves the matcher sends back to their own section at all, whatever the
  guards say (no rule on this matcher finds more);
- the rule as it is, at the default and with `instruction_preview`;
- the model at thresholds chosen on the training half (its precision there, or its move
  recall there): the moves it would find and the findings it would make on the originals.

Features: the match's kind, the rule's own decision (reported by default, in the preview,
or the reason that keeps it), where it sits (the opening, the severity of the placement),
the matched section's kind and level, the scores (matched, own, best unrelated) and their
ratios, the heading and topic words in common, whether a tool decided it, its length, its best
overlap with a sentence of the matched section (a restatement), its overlap with the
sentences next to it (local coherence), and whether its own section gathers rules of every
kind by title. None tells how the evaluation inserted a moved sentence: last in a section or
first in the prompt, as a paragraph of its own (so whether a sentence is a list item is no
feature: no moved sentence is one).

    python tests/bench/separability_instructions.py [--train tune] [--sets real,fresh,…]
    python tests/bench/separability_instructions.py --judge heldout30

Never give ``--sets`` a held-out set: its moves and findings are read to build the table.
``--judge`` trains on both halves of the seen sets and judges the sets named, once, as
``eval_instructions.py`` judges a held-out set.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(1, str(Path(__file__).resolve().parent))

import eval_instructions as ev

from assembly.diagnostics.rules import instructions as rule
from assembly.model import PromptTemplate
from assembly.prompts import parse_prompt
from assembly.settings import Settings

# The seen sets when this bench was written (``--corpus seen`` and `prompts-heldout5` …
# `prompts-heldout29`); `prompts-heldout30` and `prompts-heldout31` were judged with ``--judge``.
SEEN_SETS = (*ev.SEEN, *(f"heldout{i}" for i in range(5, 30)))
# A section that gathers rules of every kind, by its title.
_GATHERING = re.compile(
    r"\b(?:notes?|rules?|guidelines?|important|critical|key|constraints?|requirements?|"
    r"tips|best practices|remember|reminders?|principles?)\b",
    re.I,
)
_REASONS = 12  # the rule's most frequent reasons become features of their own


def candidates(row: dict) -> list[dict]:
    """The candidates of one prompt: its originals' and its moves'."""
    text = (row["dir"] / row["file"]).read_text(encoding="utf-8")
    labels = [lab["sentence"][:60] for lab in row["labels"]]
    found = []
    template = parse_prompt(text)
    for k, s in enumerate(template.sentences):
        f = _features(template, k)
        if f is not None:
            labelled = any(s.text.startswith(x) or x in s.text for x in labels)
            found.append({**f, "src": "orig", "y": labelled, "file": row["file"]})
    sections = ev.oracle_sections(text)
    for c in ev.candidates(text, sections, frozenset()):
        if c.extra:
            continue  # the evaluation's extra moves, outside its totals
        for where in ("top", "unrelated"):
            m = ev.move_top(text, c) if where == "top" else ev.move_unrelated(text, c, sections)
            if m is None:
                continue
            new, a, _, s0, s1 = m
            moved = parse_prompt(new)
            k = next(
                (i for i, s in enumerate(moved.sentences) if s.range.start <= a < s.range.end), None
            )
            f = None if k is None else _features(moved, k)
            at = None if f is None else moved.sections[f["section"]].range.start
            right = at is not None and s0 - 200 <= at < s1
            found.append({**(f or {}), "src": where, "y": right, "file": row["file"]})
    return found


def _features(template: PromptTemplate, k: int) -> dict | None:
    """The features of sentence ``k``'s match, or None when it is no candidate."""
    s = template.sentences[k]
    m = rule.explain_instruction(template, s.range.start, (), _TOPICS, preview=True)
    if m is None or m.section is None:
        return None
    target = template.sections[m.section]
    if target.range.start <= s.range.start < target.range.end:
        return None  # it sits in the section it is matched to
    mine = rule._content_words(s.text)
    restated, near = 0.0, 0.0
    for j, other in enumerate(template.sentences):
        theirs = rule._content_words(other.text)
        if j == k or not mine or not theirs:
            continue
        share = len(mine & theirs) / len(mine)
        if target.range.start <= other.range.start < target.range.end:
            restated = max(restated, share)
        if abs(j - k) == 1 and other.section == s.section:
            near = max(near, share)
    _, severity = rule._placement(template, s, m.section)
    own = "" if s.section is None else template.sections[s.section].title
    decided = "default" if m.reported and m.default else "preview" if m.reported else m.reason
    return {
        "section": m.section,
        "cat": {
            f"kind={m.kind}",
            f"rule={decided.split(' [', 1)[0].split(';')[0][:70]}",
            f"severity={severity.value}",
            f"target={target.kind}",
            f"level={min(target.level, 4)}",
            *(["opening"] if s.section is None else []),
            *(["tool"] if m.tool is not None else []),
            *(["general"] if m.general else []),
            *(["gathering"] if _GATHERING.search(own.replace("_", " ")) else []),
        },
        "num": {
            "log score": math.log1p(m.score),
            "log own": math.log1p(m.own),
            "log rival": math.log1p(m.runner_up),
            "score/own": m.score / (m.own + 1),
            "score/rival": m.score / (m.runner_up + 1),
            "heading words": len(m.heading_words),
            "topic words": len(m.topic_words),
            "log words": math.log1p(len(s.text.split())),
            "restated": restated,
            "near": near,
        },
    }


_TOPICS = Settings().section_topics


class Model:
    """A logistic regression with the classes weighted alike (plain Python: the bench
    needs no numpy)."""

    def __init__(self, train: list[dict]) -> None:
        reasons = Counter(c for r in train if r["cat"] for c in r["cat"] if c.startswith("rule="))
        cats = {c for r in train for c in r["cat"] if not c.startswith("rule=")}
        self.names = sorted(cats) + [c for c, _ in reasons.most_common(_REASONS)]
        nums = sorted(train[0]["num"])
        self.nums = nums
        cols = [[r["num"][n] for r in train] for n in nums]
        self.mean = [sum(c) / len(c) for c in cols]
        self.sd = [
            max(1e-9, (sum((x - m) ** 2 for x in c) / len(c)) ** 0.5)
            for c, m in zip(cols, self.mean, strict=True)
        ]
        xs = [self.vector(r) for r in train]
        ys = [1.0 if r["src"] != "orig" or r["y"] else 0.0 for r in train]
        pos = sum(ys)
        weight = [0.5 / pos if y else 0.5 / (len(ys) - pos) for y in ys]
        w = [0.0] * (len(xs[0]) + 1)
        for _ in range(300):
            grad = [0.0] * len(w)
            for x, y, c in zip(xs, ys, weight, strict=True):
                err = (_sigmoid(w[0] + sum(a * b for a, b in zip(w[1:], x, strict=True))) - y) * c
                grad[0] += err
                for i, a in enumerate(x):
                    grad[i + 1] += err * a
            w = [wi - 2.0 * (g + 1e-3 * wi) for wi, g in zip(w, grad, strict=True)]
        self.w = w

    def vector(self, r: dict) -> list[float]:
        cats = [1.0 if n in r["cat"] else 0.0 for n in self.names]
        nums = [
            (r["num"][n] - m) / s for n, m, s in zip(self.nums, self.mean, self.sd, strict=True)
        ]
        return cats + nums

    def p(self, r: dict) -> float:
        return _sigmoid(
            self.w[0] + sum(a * b for a, b in zip(self.w[1:], self.vector(r), strict=True))
        )


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, x))))


def table(rows: list[dict], moves: Counter[str], pick) -> str:  # type: ignore[no-untyped-def]
    """One line: the moves placed (of all moves), the findings on the originals and the
    right ones, of the candidates ``pick`` reports."""
    top = sum(1 for r in rows if r["src"] == "top" and r["y"] and pick(r))
    unrel = sum(1 for r in rows if r["src"] == "unrelated" and r["y"] and pick(r))
    found = [r for r in rows if r["src"] == "orig" and pick(r)]
    right = sum(r["y"] for r in found)
    return (
        f"{top:>4}/{moves['top']:<4} {top / max(moves['top'], 1):>4.0%} | "
        f"{unrel:>4}/{moves['unrelated']:<4} {unrel / max(moves['unrelated'], 1):>4.0%} | "
        f"{len(found):>5} {right:>5} {right / max(len(found), 1):>5.0%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--train", choices=("tune", "check"), default="tune")
    ap.add_argument("--sets", default=",".join(SEEN_SETS), help="the seen sets to read")
    ap.add_argument(
        "--judge",
        default="",
        help="held-out sets to judge once: the model is trained on both halves of --sets",
    )
    a = ap.parse_args()
    rows = [r for name in a.sets.split(",") for r in ev.load(ev.CORPORA[name])]
    halves: dict[str, list[dict]] = {"tune": [], "check": []}
    for row in rows:
        halves[ev.seen_half(row["file"])] += candidates(row)
    if a.judge:
        a.train = "seen"
        train = halves["tune"] + halves["check"]
        judged = [r for name in a.judge.split(",") for r in ev.load(ev.CORPORA[name])]
        test = [c for row in judged for c in candidates(row)]
    else:
        train = halves[a.train]
        test = halves["check" if a.train == "tune" else "tune"]
    model = Model([r for r in train if r.get("cat") and (r["src"] == "orig" or r["y"])])
    for r in train + test:
        r["p"] = model.p(r) if r.get("cat") else 0.0
    print("moves placed (top | unrelated) and findings on the originals (found, right, precision)")
    reported = {"rule=default", "rule=preview"}
    picks: list[tuple[str, Callable[[dict], bool]]] = [
        ("ceiling (matched right)", lambda r: True),
        ("rule, default", lambda r: "rule=default" in r.get("cat", ())),
        ("rule, preview", lambda r: bool(reported & r.get("cat", set()))),
    ]
    for want in (0.9, 0.5, 0.25):
        t = _threshold_for_precision(train, want)
        picks.append((f"model, train precision >= {want:.0%}", lambda r, t=t: r["p"] >= t))
    for want in (0.5, 0.75, 0.9):
        t = _threshold_for_recall(train, want)
        picks.append((f"model, train recall {want:.0%}", lambda r, t=t: r["p"] >= t))
    for name, half in (("train " + a.train, train), ("judged " + (a.judge or "half"), test)):
        moves = Counter(r["src"] for r in half if r["src"] != "orig")
        print(f"\n{name}: {len(half)} candidates, {moves['top']} + {moves['unrelated']} moves")
        for label, pick in picks:
            print(f"  {label:30} {table(half, moves, pick)}")
        print(
            f"  AUC, what the preview reports: unrelated moves vs wrong findings {_auc(half):.2f}"
        )
    _compare(train)
    named = zip(model.w[1:], model.names + model.nums, strict=True)
    weights = sorted(named, key=lambda x: -abs(x[0]))
    print("\nweights (standardised):", ", ".join(f"{n} {w:+.2f}" for w, n in weights[:12]))


def _compare(rows: list[dict]) -> None:
    """What the rule's preview reports on the training half: the moves it places into an
    unrelated section beside its wrong findings on the originals, feature by feature (the
    median of each number, the share of each category)."""
    reported = {"rule=default", "rule=preview"}
    moved = [r for r in rows if r["src"] == "unrelated" and r["y"] and reported & r["cat"]]
    wrong = [r for r in rows if r["src"] == "orig" and not r["y"] and reported & r["cat"]]
    if not moved or not wrong:
        return
    print(
        f"\nreported with the preview: {len(moved)} unrelated moves | {len(wrong)} wrong findings"
    )
    for n in sorted(moved[0]["num"]):
        a, b = (sorted(r["num"][n] for r in rs)[len(rs) // 2] for rs in (moved, wrong))
        print(f"  {n:30} median {a:6.2f} | {b:6.2f}")
    cats = Counter(c for r in moved + wrong for c in r["cat"] if not c.startswith("rule="))
    for c, _ in cats.most_common(16):
        a, b = (sum(c in r["cat"] for r in rs) / len(rs) for rs in (moved, wrong))
        print(f"  {c:30} share  {a:6.0%} | {b:6.0%}")


def _auc(rows: list[dict]) -> float:
    """How often the model ranks an unrelated move the preview reports above a wrong
    finding of the preview on the originals (0.5 is chance)."""
    reported = {"rule=default", "rule=preview"}
    moved = [r["p"] for r in rows if r["src"] == "unrelated" and r["y"] and reported & r["cat"]]
    wrong = [r["p"] for r in rows if r["src"] == "orig" and not r["y"] and reported & r["cat"]]
    pairs = sum((a > b) + 0.5 * (a == b) for a in moved for b in wrong)
    return pairs / max(1, len(moved) * len(wrong))


def _threshold_for_precision(rows: list[dict], want: float) -> float:
    """The lowest threshold at which the findings on the originals are ``want`` right."""
    orig = sorted((r for r in rows if r["src"] == "orig"), key=lambda r: -r["p"])
    best, right = 1.0, 0
    for i, r in enumerate(orig, 1):
        right += r["y"]
        if right / i >= want:
            best = r["p"]
    return best


def _threshold_for_recall(rows: list[dict], want: float) -> float:
    """The threshold at which ``want`` of the moves are placed."""
    ps = sorted((r["p"] for r in rows if r["src"] != "orig"), reverse=True)
    return ps[min(len(ps) - 1, int(want * len(ps)))]


if __name__ == "__main__":
    main()
