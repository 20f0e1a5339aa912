"""One migration runner for Ember's SQLite files: the history and the documents index.

    start = migrate(conn, {0: V1, 1: V2, 2: add_heads}, too_new=SchemaTooNew)

A file's `PRAGMA user_version` is its schema version; the step keyed `n` takes it from version n to
n + 1 inside one `BEGIN IMMEDIATE` transaction (SQLite DDL is transactional, `user_version` included),
so a crash mid-step leaves the version before it. Two Ember processes may open one file at once: a
step runs only if the version is still the one it starts from once the write lock is held. A file
from a newer Ember is refused before anything is written to it. A long step can be `InParts`: one
transaction per part (each safe to run again), so an interrupted step goes on where it stopped.

`conn` must be in autocommit mode (`isolation_level=None`): the runner's BEGIN is the only transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Work = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True, slots=True)
class InParts:
    """A step done one transaction per part: `parts(conn)` lists them (each must be safe to run twice)."""

    parts: Callable[[sqlite3.Connection], Sequence[Work]]


Step = tuple[str, ...] | Work | InParts


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def latest(steps: Mapping[int, Step]) -> int:
    return max(steps) + 1


def migrate(
    conn: sqlite3.Connection,
    steps: Mapping[int, Step],
    *,
    too_new: Callable[[int, int], Exception],
    fresh: tuple[str, ...] = (),
    target: int | None = None,
) -> int:
    """Bring `conn` to `target` (default: the newest version); return the version it had.

    `fresh`, when given, creates the newest schema in an empty file (version 0) at once, instead of
    the steps from 0 (the documents index keeps no old first version to start from).
    """
    newest = latest(steps)
    start = user_version(conn)
    if start > newest:
        raise too_new(start, newest)
    end = newest if target is None else target
    if start == 0 and fresh:
        _once(conn, 0, lambda c: _statements(c, fresh), newest)
        return start
    for version in range(start, end):
        step = steps[version]
        if isinstance(step, InParts):
            for part in step.parts(conn):
                _once(conn, version, part, None)
            _once(conn, version, lambda _c: None, version + 1)
        else:
            _once(conn, version, _as_work(step), version + 1)
    return start


def _as_work(step: tuple[str, ...] | Work) -> Work:
    if callable(step):
        return step
    return lambda conn: _statements(conn, step)


def _statements(conn: sqlite3.Connection, statements: tuple[str, ...]) -> None:
    for statement in statements:
        conn.execute(statement)


def _once(conn: sqlite3.Connection, version: int, work: Work, then: int | None) -> None:
    """`work` in one write transaction, if the file is still at `version` (else another process went on)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if user_version(conn) == version:
            work(conn)
            if then is not None:
                conn.execute(f"PRAGMA user_version = {then:d}")  # PRAGMA takes no parameters
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
