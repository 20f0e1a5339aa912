"""The one migration runner both databases use (engine.migrations)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.migrations import InParts, Step, Work, migrate, user_version


class TooNew(Exception):
    def __init__(self, found: int, supported: int) -> None:
        super().__init__(f"{found} > {supported}")


STEPS: dict[int, Step] = {
    0: ("CREATE TABLE t (a INTEGER)",),
    1: ("ALTER TABLE t ADD COLUMN b INTEGER",),
    2: lambda conn: _insert(conn),
}


def _insert(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO t (a, b) VALUES (1, 2)")


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_a_new_file_takes_every_step_and_says_where_it_started(tmp_path: Path) -> None:
    conn = _open(tmp_path / "db")
    assert migrate(conn, STEPS, too_new=TooNew) == 0
    assert user_version(conn) == 3
    assert conn.execute("SELECT a, b FROM t").fetchall() == [(1, 2)]
    assert migrate(conn, STEPS, too_new=TooNew) == 3  # nothing left to do: the row is not added twice
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1


def test_a_failing_step_leaves_the_version_before_it(tmp_path: Path) -> None:
    conn = _open(tmp_path / "db")
    broken: dict[int, Step] = {**STEPS, 1: ("ALTER TABLE t ADD COLUMN b INTEGER", "NOT SQL")}
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, broken, too_new=TooNew)
    assert user_version(conn) == 1
    assert [r[1] for r in conn.execute("PRAGMA table_info(t)")] == ["a"]  # the step's first half rolled back


def test_a_newer_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    conn = _open(tmp_path / "db")
    conn.execute("PRAGMA user_version = 9")
    with pytest.raises(TooNew, match="9 > 3"):
        migrate(conn, STEPS, too_new=TooNew)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_a_step_another_process_took_while_this_one_waited_is_skipped(tmp_path: Path) -> None:
    from engine.migrations import _once  # pyright: ignore[reportPrivateUsage]  (the re-check under the write lock)

    conn, other = _open(tmp_path / "db"), _open(tmp_path / "db")
    migrate(conn, STEPS, too_new=TooNew, target=1)
    seen = user_version(conn)  # this process decides to take step 1 …
    migrate(other, STEPS, too_new=TooNew, target=2)  # … while another takes it first
    ran: list[int] = []
    _once(conn, seen, lambda c: ran.append(seen), seen + 1)
    assert ran == [] and user_version(conn) == 2


def test_a_step_in_parts_goes_on_where_an_interruption_left_it(tmp_path: Path) -> None:
    conn = _open(tmp_path / "db")
    done: list[str] = []

    def part(name: str, fail: bool = False) -> Work:
        def run(c: sqlite3.Connection) -> None:
            if fail:
                raise RuntimeError("killed")
            c.execute("INSERT INTO log (name) VALUES (?)", (name,))
            done.append(name)

        return run

    create: Step = ("CREATE TABLE log (name TEXT UNIQUE)",)
    first: dict[int, Step] = {
        0: create,
        1: InParts(lambda c: [part("a"), part("b", True)]),
    }
    with pytest.raises(RuntimeError):
        migrate(conn, first, too_new=TooNew)
    assert user_version(conn) == 1 and done == ["a"]  # the first part is kept, the version not moved

    def once(name: str) -> Work:  # a part safe to run again, as the runner requires
        def run(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR IGNORE INTO log (name) VALUES (?)", (name,))

        return run

    again: dict[int, Step] = {0: create, 1: InParts(lambda c: [once("a"), once("b")])}
    migrate(conn, again, too_new=TooNew)
    assert user_version(conn) == 2
    assert [r[0] for r in conn.execute("SELECT name FROM log ORDER BY name")] == ["a", "b"]


def test_fresh_creates_the_newest_schema_at_once(tmp_path: Path) -> None:
    conn = _open(tmp_path / "db")
    steps: dict[int, Step] = {1: ("NOT SQL",), 2: ("NOT SQL",)}  # never run on an empty file
    assert migrate(conn, steps, too_new=TooNew, fresh=("CREATE TABLE t (a INTEGER)",)) == 0
    assert user_version(conn) == 3
