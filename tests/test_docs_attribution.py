"""Every answer from documents shows what supports it: the model's [n], or each paragraph's passages by their words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.core.citations import supporting_from_stats, supporting_numbers
from engine.docs.attribution import AnswerSources, attribute, paragraphs
from engine.events import ContentDelta, Recovery, SourceRef, Sources, TurnDone, TurnStats, event_to_json

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
    assert supporting_numbers(again.paragraphs) == (2,)
    stats = {"source_paragraphs": [p.to_json() for p in again.paragraphs] + [{"sources": ["x", True, 5]}, 7]}
    assert supporting_from_stats(stats) == (2, 5)  # malformed entries are skipped


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
    assert "[1] note.md" in err and "paragraph 1 supported by [1]" in err
    assert main([*args, "--events", "Where is the spare key?"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    sources = [e for e in events if e["type"] == "sources"]
    assert len(sources) == 2 and "paragraphs" not in sources[0]
    assert sources[1]["paragraphs"][0]["sources"] == [1]
    assert [e["type"] for e in events].index("done") > [e["type"] for e in events].index("content")
