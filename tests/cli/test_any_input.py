"""Every input to the command ends in one line and an exit code: never a traceback.

Arguments are generated (hypothesis): any text, including what os.fsdecode
makes of bytes that are not UTF-8, numbers of any size, ages of any length.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _clitools import Call, Spec, conversation, write_db
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Text as a shell hands it to Python: any code point, lone surrogates included (bytes that were not UTF-8).
_any_text = st.text(st.characters(codec=None, exclude_characters="\x00"), max_size=30)
_number = st.integers(min_value=-(2**70), max_value=2**70).map(str)
_commands = st.one_of(
    st.tuples(st.just("list"), st.sampled_from(["--cwd", "-n"]), _any_text | _number),
    st.tuples(st.just("show"), _any_text),
    st.tuples(st.just("search"), _any_text, st.just("-n"), _number),
    st.tuples(st.just("search"), st.just("--fts"), _any_text),
    st.tuples(st.just("title"), st.sampled_from(["0", "00"]), _any_text),
    st.tuples(st.just("delete"), _any_text),
    st.tuples(st.just("prune"), st.just("--older-than"), _number.map(lambda n: n + "w") | _any_text),
    st.tuples(st.just("export"), _any_text),
    st.tuples(st.just("db"), st.just("downgrade"), _any_text),
)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("any") / "agent.db"
    write_db(db, [Spec(conversation()), Spec(conversation(), cwd="/elsewhere")])
    return db


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_commands)
def test_any_arguments_end_in_one_line_and_an_exit_code(call: Call, database: Path, command: tuple[str, ...]) -> None:
    done = call("--db", database, *command)  # a traceback would escape main() and fail the test here
    assert done.code in (0, 1, 2), done
    if done.code == 1:
        assert done.err.count("\n") == 1 and done.err.startswith("sessionstore"), done.err
