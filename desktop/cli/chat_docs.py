"""`ember chat --attach FILE --docs NAME`: the documents a command-line turn is grounded in.

    ember chat --attach report.pdf "what does it say about Q3?"
    ember chat --docs "Tax 2026" -c "and the deductions?"

An attached file that cannot be read is one line on stderr naming it; the turn goes on with
the rest. With `--events`, a `sources` line (the numbered passages the prompt carries) comes
before the answer; in plain output the sources are listed on stderr after it. The collection
chosen with `--docs` and the attached files are remembered with the conversation (`-c`
continues with them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from desktop.cli.common import warn
from desktop.core.documents import TurnDocuments, attachments_for, collection_for
from engine.docs.context import label
from engine.docs.names import shown
from engine.events import Sources


def add_doc_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("documents")
    g.add_argument("--attach", metavar="FILE", action="append", default=[],
                   help="answer from this file (text, Markdown, code, HTML, PDF, DOCX; repeatable)")
    g.add_argument("--docs", metavar="NAME", default=None,
                   help="answer from this collection (see `ember docs`); remembered with the conversation")


def open_docs(args: argparse.Namespace, conversation: dict[str, object] | None) -> TurnDocuments:
    """The turn's documents; DocsDatabaseError/ModelLoadError (one line) for an unusable collection."""
    docs, problems = TurnDocuments.open(attachments_for(conversation, [Path(p) for p in args.attach]),
                                        collection_for(conversation, args.docs))
    for problem in problems:
        warn(problem)
    return docs


def print_sources(event: Sources) -> None:
    """The sources after a plain-text answer, on stderr (stdout keeps the answer alone)."""
    sys.stdout.flush()  # the answer's last line first, on a terminal showing both
    for ref in event.sources:
        sys.stderr.write(f"[{ref.n}] {label(ref)} ({shown(ref.path)}, characters {ref.start}-{ref.end})\n")
