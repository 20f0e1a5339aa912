"""Every answer from documents shows what supports it: the model's [n], or each paragraph's passages by their words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.core.citations import answer_from_stats
from engine.docs.attribution import AnswerSources, attribute, paragraphs
from engine.events import (
    ANSWER_FROM_GIVEN,
    ANSWER_FROM_PARAGRAPHS,
    AnswerFrom,
    ContentDelta,
    Recovery,
    SourceRef,
    Sources,
    TurnDone,
    TurnStats,
    event_to_json,
)

PASSAGES = (
    SourceRef(
        1, "/kb/bread.md", None, 0, 80, 0.5, "Knead the dough for ten minutes, then let it rise in a warm place."
    ),
    SourceRef(2, "/kb/bikes.md", None, 0, 80, 0.4, "Oil the chain after riding in the rain, and check the brakes."),
    SourceRef(3, "/kb/tea.md", None, 0, 80, 0.3, "Green tea steeps for two minutes in water below boiling."),
)


def test_each_paragraph_gets_the_passages_whose_words_it_uses() -> None:
    answer = (
        "You should knead the dough for about ten minutes and leave it to rise somewhere warm.\n\n"
        "After a rainy ride, oil the bike chain and check both brakes.\n\n"
        "Sure!"
    )
    got = attribute(answer, PASSAGES)
    assert [(answer[p.start : p.end][:12], p.sources, p.cited) for p in got] == [
        ("You should k", (1,), False),
        ("After a rain", (2,), False),
        ("Sure!", (), False),  # too short to judge
    ]
    assert attribute(answer, PASSAGES) == got  # deterministic


def test_a_paragraph_about_something_else_gets_no_source() -> None:
    got = attribute("The capital of Australia is Canberra, which was chosen as a compromise.", PASSAGES)
    assert [p.sources for p in got] == [()]


def test_the_models_own_citations_are_kept_and_checked() -> None:
    answer = "Knead it ten minutes [1] [7].\n\nGreen tea wants cooler water [3]."
    got = attribute(answer, PASSAGES)
    assert [(p.sources, p.cited) for p in got] == [((1,), True), ((3,), True)]  # [7] names no passage


def test_paragraphs_are_split_at_blank_lines() -> None:
    text = "  one\n\n\ntwo\n \nthree  "
    assert [text[s:e] for s, e in paragraphs(text)] == ["one", "two", "three"]


def test_the_sources_come_again_with_paragraphs_before_the_turn_ends() -> None:
    follow = AnswerSources(Sources(PASSAGES))
    assert follow.before(ContentDelta("Something wrong")) is None
    assert follow.before(Recovery("empty")) is None  # a new attempt replaces the text
    follow.before(ContentDelta("Oil the chain after riding in the rain, "))
    follow.before(ContentDelta("and check the brakes."))
    again = follow.before(TurnDone(TurnStats()))
    assert again is not None and again.sources == PASSAGES
    assert again.paragraphs is not None and [p.sources for p in again.paragraphs] == [(2,)]
    line = event_to_json(again)
    assert line["type"] == "sources" and line["paragraphs"] == [{"start": 0, "end": 61, "sources": [2], "cited": False}]
    assert line["answer_from"] == {"basis": "paragraphs", "sources": [2]}
    stats = {"source_paragraphs": [p.to_json() for p in again.paragraphs] + [{"sources": ["x", True, 3, 9]}, 7]}
    # malformed entries are skipped, and so is a number naming no stored source (9)
    assert answer_from_stats(stats, PASSAGES) == AnswerFrom(ANSWER_FROM_PARAGRAPHS, (2, 3))
    assert answer_from_stats({}, PASSAGES) is None  # stored before answers were attributed


def test_an_answer_nothing_supports_shows_what_the_model_was_given() -> None:
    """An off-topic answer still shows where it came from: every passage given, labelled as given (#50)."""
    follow = AnswerSources(Sources(PASSAGES))
    assert follow.before(ContentDelta("The capital of Australia is Canberra, chosen as a compromise.")) is None
    again = follow.before(TurnDone(TurnStats()))
    assert again is not None and again.paragraphs is not None and [p.sources for p in again.paragraphs] == [()]
    assert again.answer_from() == AnswerFrom(ANSWER_FROM_GIVEN, (1, 2, 3))
    assert event_to_json(again)["answer_from"] == {"basis": "given", "sources": [1, 2, 3]}
    assert Sources(PASSAGES).answer_from() is None  # before the answer is whole: nothing said yet
    assert "answer_from" not in event_to_json(Sources(PASSAGES))
    stats = {"source_paragraphs": [p.to_json() for p in again.paragraphs]}
    assert answer_from_stats(stats, PASSAGES) == again.answer_from()  # the same, read back from history
    assert answer_from_stats({"source_paragraphs": []}, PASSAGES) == again.answer_from()  # an empty answer


def test_ember_chat_shows_each_paragraphs_sources_when_the_model_cites_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli.main import main

    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot by the door.\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["The spare key is under the blue pot, next to the door."]]}))
    args = ["chat", "--backend", f"script:{script}", "--attach", str(note), "--no-history"]
    assert main([*args, "Where is the spare key?"]) == 0
    err = capsys.readouterr().err
    assert "[1] note.md" in err and "paragraph 1 supported by [1]" in err and "answer from: [1] note.md" in err
    assert "given to the model" not in err
    assert main([*args, "--events", "Where is the spare key?"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    sources = [e for e in events if e["type"] == "sources"]
    assert len(sources) == 2 and "paragraphs" not in sources[0]
    assert sources[1]["paragraphs"][0]["sources"] == [1]
    assert sources[1]["answer_from"] == {"basis": "paragraphs", "sources": [1]}
    assert [e["type"] for e in events].index("done") > [e["type"] for e in events].index("content")


def test_ember_chat_labels_the_passages_given_when_no_paragraph_matches_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fifth answer of the bench: off-topic, so no paragraph is supported; the passages still show (#50)."""
    from desktop.cli.main import main

    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot by the door.\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Canberra became the capital as a compromise between cities."]]}))
    args = ["chat", "--backend", f"script:{script}", "--attach", str(note), "--no-history"]
    assert main([*args, "Where is the spare key?"]) == 0
    err = capsys.readouterr().err.splitlines()
    at = err.index("no paragraph of the answer matches a passage closely; the model was given:")
    assert err[at + 1].startswith("[1] note.md (")
    assert not any(line.startswith(("answer from:", "paragraph 1")) for line in err)
    assert main([*args, "--events", "Where is the spare key?"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    final = [e for e in events if e["type"] == "sources"][-1]
    assert final["paragraphs"][0]["sources"] == [] and final["answer_from"] == {"basis": "given", "sources": [1]}
