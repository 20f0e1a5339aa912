"""`ember chat --attach FILE --docs NAME`: the documents a command-line turn is grounded in.

    ember chat --attach report.pdf "what does it say about Q3?"
    ember chat --docs "Tax 2026" -c "and the deductions?"

An attached file that cannot be read is one line on stderr naming it; the turn goes on with
the rest. With `--events`, a `sources` line (the numbered passages the prompt carries) comes
before the answer, and another after it with `paragraphs` (each paragraph's supporting passages:
the model's `[n]`, or `engine.docs.attribution`'s when it cited none) and `answer_from` (what
the answer came from: those passages, or when no paragraph matched one, all it was given). In
plain output the sources are listed on stderr after the answer, then each paragraph's, then an
`answer from:` line; when no paragraph matched a passage the list is headed as what the model
was given instead. The collection chosen with `--docs` and the attached files are remembered with
the conversation (`-c` continues with them).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from desktop.cli.common import warn
from desktop.core.citations import unsupported_citations
from engine.api.documents import TurnDocuments, label
from engine.api.session import Ask, ChatSession
from engine.api.text import escaped as shown
from engine.api.values import ANSWER_FROM_GIVEN, Sources


def add_doc_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("documents")
    g.add_argument(
        "--attach",
        metavar="FILE",
        action="append",
        default=[],
        help="answer from this file (text, Markdown, code, HTML, PDF, DOCX; repeatable)",
    )
    g.add_argument(
        "--docs",
        metavar="NAME",
        default=None,
        help="answer from this collection (see `ember docs`); remembered with the conversation",
    )


def open_docs(session: ChatSession, ask: Ask) -> TurnDocuments:
    """The documents `ask` is answered from, opened and remembered by the session (as the window's are);
    each attached file it could not read is one line on stderr.

    Raises DocsDatabaseError/ModelLoadError (one line) for an unusable collection.
    """
    docs = asyncio.run(session.prepare_documents(ask))
    for problem in docs.problems:
        warn(problem)
    return docs


def print_supporting(event: Sources) -> None:
    """Each paragraph's supporting passages, when the model cited none itself (`engine.docs.attribution`)."""
    paragraphs = event.paragraphs or ()
    if not paragraphs or all(p.cited for p in paragraphs):
        return
    for i, p in enumerate(paragraphs, 1):
        cites = " ".join(f"[{n}]" for n in p.sources) or "no source matches it"
        how = "cites" if p.cited else "supported by"
        sys.stderr.write(f"paragraph {i} {how} {cites}\n" if p.sources else f"paragraph {i}: {cites}\n")


def print_sources(event: Sources, answer: str = "", no_match: str = "") -> None:
    """The sources after a plain-text answer, on stderr (stdout keeps the answer alone), what the answer
    came from, and its unsupported [n]."""
    sys.stdout.flush()  # the answer's last line first, on a terminal showing both
    if no_match:
        warn(no_match)
    origin = event.answer_from()
    given_only = origin is not None and origin.basis == ANSWER_FROM_GIVEN and bool(event.sources)
    if given_only:
        sys.stderr.write("no paragraph of the answer matches a passage closely; the model was given:\n")
    for ref in event.sources:
        sys.stderr.write(f"[{ref.n}] {label(ref)} ({shown(ref.path)}, characters {ref.start}-{ref.end})\n")
    if origin is not None and not given_only:
        print_supporting(event)
        names = {ref.n: label(ref) for ref in event.sources}
        sys.stderr.write("answer from: " + " · ".join(f"[{n}] {names[n]}" for n in origin.sources) + "\n")
    given = len(event.sources)
    for n in unsupported_citations(answer, {ref.n for ref in event.sources}):
        warn(
            f"[{n}] in the answer is unsupported: no source [{n}] was given "
            f"({f'only [1]-[{given}]' if given else 'none were'})"
        )
