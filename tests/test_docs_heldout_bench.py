"""Issue #50's held-out set and answers bench: well formed, and the labelled attribution counts right."""

from __future__ import annotations

import re

from tests.bench.docs_answers import QUESTIONS, precision
from tests.bench.docs_heldout_corpus import FILES, answer_key
from tests.bench.docs_heldout_questions import KEYWORD, PARAPHRASE

STEMS = {answer_key(r) for r in FILES}


def test_the_set_has_20_of_each_kind_and_every_answer_is_in_the_corpus() -> None:
    assert len(FILES) == len(STEMS) == 13
    assert len(KEYWORD) == 20 and len(PARAPHRASE) == 20
    assert {a for _, a in KEYWORD + PARAPHRASE} | {a for _, a in QUESTIONS} <= STEMS
    assert len({q for q, _ in KEYWORD + PARAPHRASE}) == 40


def test_paraphrases_do_not_name_their_package() -> None:
    for question, answer in PARAPHRASE:
        package = re.sub(r"\d+$", "", answer.split("-")[0].lower())
        assert not re.search(rf"\b{re.escape(package)}\b", question.lower()), question


def test_attribution_precision_is_the_share_of_shown_passages_from_the_answer_file() -> None:
    figures = [
        {"answer_file": "a", "shown_sources": ["a", "b"], "shown_right_file": True, "cited": []}
        | {"answer_from_right_file": True, "answer_from_basis": "paragraphs"},
        {"answer_file": "c", "shown_sources": ["c"], "shown_right_file": True, "cited": [1]}
        | {"answer_from_right_file": True, "answer_from_basis": "paragraphs"},
        {"answer_file": "d", "shown_sources": [], "shown_right_file": False, "cited": []}
        | {"answer_from_right_file": True, "answer_from_basis": "given"},  # nothing supported: what it was given
    ]
    assert precision(figures) == {
        "docs_attribution_precision": 0.667,
        "docs_attribution_shown": 3,
        "docs_answers_with_right_source": 2,
        "docs_answers_showing_right_source": 3,
        "docs_answers_shown_as_given": 1,
        "docs_answers_citing": 1,
    }


def test_the_threshold_is_chosen_on_answers_that_are_not_the_five() -> None:
    from tests.bench.docs_attribution_set import TUNING, choose, scored

    assert len(TUNING) == 15 and not set(TUNING) & set(QUESTIONS)  # the five are the test set
    lantern = "The harbour lantern burns whale oil and is trimmed each dusk by the keeper."
    case = {
        "answer_file": "lantern",
        "answer": "The keeper trims the harbour lantern at dusk; it burns whale oil.",
        "passages": [
            {"n": 1, "file": "lantern", "text": lantern},
            {"n": 2, "file": "tides", "text": "Spring tides come twice a month, at new and full moon."},
        ],
    }
    row = scored([case], 0.15)
    assert (row["precision"], row["shown"], row["answers_with_right_source"]) == (1.0, 1, 1)
    sweep = [
        {"threshold": 0.1, "precision": 0.8, "answers_with_right_source": 9},  # too imprecise
        {"threshold": 0.2, "precision": 0.95, "answers_with_right_source": 7},
        {"threshold": 0.25, "precision": 1.0, "answers_with_right_source": 7},  # the tie: the stricter
        {"threshold": 0.3, "precision": 1.0, "answers_with_right_source": 5},
    ]
    assert choose(sweep) == 0.25
