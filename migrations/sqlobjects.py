"""Views, triggers and full-text indexes, each written once: Alembic's "replaceable objects" recipe.

SQLite cannot alter a view or a trigger, nor ``CREATE OR REPLACE`` one: a revision that changes one drops it
and creates it anew, and its downgrade does the reverse with the definition it had before. So a definition
is written once, as a constant of the revision that introduces it, and later revisions *name* it,
``"<revision>.<CONSTANT>"`` (``"0002.TRANSCRIPT"``), instead of copying its SQL; the name is looked up in that
revision's module, through Alembic's script directory, when the SQL is needed.

Importing this module adds three operations to ``op``, each taking an object or the name of one:

* ``op.create_object(obj)``: its CREATE statements;
* ``op.drop_object(obj)``: its DROP statements;
* ``op.replace_object(new, replaces="0002.TRANSCRIPT")``: drop the earlier object, create ``new``; the
  downgrade says ``replace_with="0002.TRANSCRIPT"``: drop ``new``, create the earlier one again.

Revisions import it as ``sessionstore.migrations.sqlobjects``: Alembic loads a revision by its file path, so a
relative import cannot work, and that is the module's name in the wheel and in an editable install (which the
``alembic`` command, run from the repository root, uses too). Released revisions run what these classes
write: a class's statements never change (a new kind of statement is a new class).

PostgreSQL's objects differ in kind, not only in spelling: a trigger runs a function and is dropped ``ON`` its
table (:class:`Function`, :class:`TableTrigger`), and full-text search is an index over the same text
(:class:`Index`), kept in step by the database itself. A revision whose SQL differs between the two defines
each its own objects and picks by ``op.get_bind().dialect.name``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from alembic.operations import MigrateOperation, Operations
from alembic.script import ScriptDirectory

__all__ = [
    "Column",
    "EditedView",
    "ExtendedView",
    "ForeignKey",
    "FullTextIndex",
    "Function",
    "IndexTrigger",
    "Group",
    "Index",
    "Part",
    "Policy",
    "RowSecurity",
    "SQLObject",
    "Table",
    "TableTrigger",
    "Trigger",
    "View",
    "ViewOptions",
    "VirtualTable",
    "find",
]


class SQLObject:
    """A schema object SQLite creates whole and drops whole; the objects it names are looked up in ``scripts``."""

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        """The statements that create it."""
        raise NotImplementedError

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        """The statements that drop it (``IF EXISTS``: a downgrade goes through one dropped by hand)."""
        raise NotImplementedError


Part = SQLObject | str
"""An object, or the name of one a revision defined: ``"<revision>.<CONSTANT>"``."""

_O = TypeVar("_O", bound=SQLObject)


def find(scripts: ScriptDirectory, part: _O | str, kind: type[_O]) -> _O:
    """``part`` itself, or the object it names."""
    if not isinstance(part, str):
        return part
    revision, _, name = part.partition(".")
    script = scripts.get_revision(revision) if revision else None
    found = getattr(script.module, name, None) if script is not None and script.revision == revision else None
    if not isinstance(found, kind):
        raise LookupError(f"{part!r} names no {kind.__name__} (write '<revision>.<CONSTANT>')")
    return found


@dataclass(frozen=True)
class View(SQLObject):
    name: str
    select: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE VIEW {self.name} AS\n{self.select}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP VIEW IF EXISTS {self.name}"


@dataclass(frozen=True)
class ExtendedView(SQLObject):
    """An earlier revision's view with more columns, written after its own, over the same ``FROM``.

    The earlier SELECT is used as it is (written once, there); ``columns`` (``expression AS name, ...``) go
    before its last top-level ``FROM`` line. Dropped as the view it extends is.
    """

    view: View | str
    columns: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        view = find(scripts, self.view, View)
        select, newline_from, rest = view.select.rpartition("\nFROM ")
        if not newline_from:
            raise ValueError(f"{view.name}: no FROM line to add columns before in {view.select!r}")
        yield from View(view.name, f"{select},\n    {self.columns}\nFROM {rest}").create(scripts)

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield from find(scripts, self.view, View).drop(scripts)


@dataclass(frozen=True)
class EditedView(SQLObject):
    """An earlier revision's view (of any kind: a :class:`View`, an :class:`ExtendedView`) with parts of its SQL
    replaced and, like :class:`ExtendedView`, more columns before its last top-level ``FROM`` line.

    Each ``(old, new)`` of ``edits`` must be in the earlier SQL (a revision never edits what is not there).
    Dropped as the view it edits is.
    """

    view: SQLObject | str
    edits: tuple[tuple[str, str], ...]
    columns: str = ""

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        for sql in find(scripts, self.view, SQLObject).create(scripts):
            for old, new in self.edits:
                if old not in sql:
                    raise ValueError(f"{old!r} is not in the view's SQL: {sql!r}")
                sql = sql.replace(old, new)
            if self.columns:
                select, newline_from, rest = sql.rpartition("\nFROM ")
                if not newline_from:
                    raise ValueError(f"no FROM line to add columns before in {sql!r}")
                sql = f"{select},\n    {self.columns}\nFROM {rest}"
            yield sql

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield from find(scripts, self.view, SQLObject).drop(scripts)


@dataclass(frozen=True)
class Trigger(SQLObject):
    name: str
    body: str
    """What follows the name: ``AFTER INSERT ON events BEGIN ...; END``."""

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE TRIGGER {self.name} {self.body}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP TRIGGER IF EXISTS {self.name}"


@dataclass(frozen=True)
class Table(SQLObject):
    """A table that belongs to another object (an index's bookkeeping), not to the models: made with its rows."""

    name: str
    columns: str
    """The column list: ``(id INTEGER PRIMARY KEY, ...)``."""
    rows: str = ""
    """A SELECT giving the rows it starts with."""

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE TABLE {self.name} {self.columns}"
        if self.rows:
            yield f"INSERT INTO {self.name} {self.rows}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP TABLE IF EXISTS {self.name}"


@dataclass(frozen=True)
class VirtualTable(SQLObject):
    name: str
    using: str
    """The module and its arguments: ``fts5(text, ...)``."""

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE VIRTUAL TABLE {self.name} USING {self.using}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP TABLE IF EXISTS {self.name}"  # its shadow tables go with it


@dataclass(frozen=True)
class FullTextIndex(SQLObject):
    """An FTS5 table and the triggers that keep it in step with its content: one cannot stand without the other.

    Created, it indexes the rows already there (``'rebuild'``); the triggers, which write to the table, are
    dropped before it.
    """

    table: VirtualTable | str
    triggers: tuple[Trigger | str, ...]

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        table = find(scripts, self.table, VirtualTable)
        yield from table.create(scripts)
        for trigger in self.triggers:
            yield from find(scripts, trigger, Trigger).create(scripts)
        yield f"INSERT INTO {table.name} ({table.name}) VALUES ('rebuild')"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        for trigger in reversed(self.triggers):
            yield from find(scripts, trigger, Trigger).drop(scripts)
        yield from find(scripts, self.table, VirtualTable).drop(scripts)


@dataclass(frozen=True)
class IndexTrigger(SQLObject):
    """One of a full-text index's triggers, as an earlier revision wrote it; with a ``guard``, firing only where
    the guard holds too.

    The earlier body is used as it is (its text expression is written once, there); ``guard`` is ANDed to its
    ``WHEN`` clause. ``before`` makes an ``AFTER`` trigger fire ``BEFORE`` the statement instead: SQLite does
    not order two triggers of one event, and an update's ``'delete'`` of the old text must reach an index
    before the new text's insert (else a word in both is taken out).
    """

    index: FullTextIndex | str
    name: str
    guard: str = ""
    before: bool = False

    def _trigger(self, scripts: ScriptDirectory) -> Trigger:
        index = find(scripts, self.index, FullTextIndex)
        for part in index.triggers:
            trigger = find(scripts, part, Trigger)
            if trigger.name == self.name:
                return trigger
        raise LookupError(f"{self.index!r} has no trigger {self.name!r}")

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        body = self._trigger(scripts).body
        if self.before:
            if not body.startswith("AFTER "):
                raise ValueError(f"{self.name}: not an AFTER trigger: {body!r}")
            body = "BEFORE " + body.removeprefix("AFTER ")
        if self.guard:
            head, begin, rest = body.partition(" BEGIN ")
            if " WHEN " not in head or not begin:
                raise ValueError(f"{self.name}: no WHEN clause to guard in {body!r}")
            body = f"{head} AND {self.guard}{begin}{rest}"
        yield f"CREATE TRIGGER {self.name} {body}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP TRIGGER IF EXISTS {self.name}"


@dataclass(frozen=True)
class Function(SQLObject):
    """A PostgreSQL function: ``arguments`` as declared (``payload text, path text``), ``definition`` what
    follows them (``RETURNS text LANGUAGE sql IMMUTABLE AS $$ ... $$``)."""

    name: str
    arguments: str
    definition: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE FUNCTION {self.name}({self.arguments}) {self.definition}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        types = ", ".join(argument.split()[-1] for argument in self.arguments.split(",") if argument.strip())
        yield f"DROP FUNCTION IF EXISTS {self.name}({types})"


@dataclass(frozen=True)
class TableTrigger(SQLObject):
    """A PostgreSQL trigger: dropped ``ON`` its table; ``body`` is what follows the name
    (``AFTER INSERT ON events ... EXECUTE FUNCTION f()``)."""

    name: str
    table: str
    body: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE TRIGGER {self.name} {self.body}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP TRIGGER IF EXISTS {self.name} ON {self.table}"


@dataclass(frozen=True)
class Index(SQLObject):
    """An index over expressions (which the models cannot describe): ``definition`` follows ``ON``."""

    name: str
    definition: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE INDEX {self.name} ON {self.definition}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP INDEX IF EXISTS {self.name}"


@dataclass(frozen=True)
class Column(SQLObject):
    """A column one database alone has, which no statement names (its default fills it), so not in the models:
    ``definition`` follows its name (``text NOT NULL DEFAULT CURRENT_USER``). Dropped with its values."""

    table: str
    name: str
    definition: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} ADD COLUMN {self.name} {self.definition}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} DROP COLUMN IF EXISTS {self.name}"


@dataclass(frozen=True)
class ForeignKey(SQLObject):
    """A foreign key one database keeps otherwise than the models say (PostgreSQL's fork reference, checked at
    commit: revision 0013), made in place of the constraint of the same name; dropped, that constraint is made
    again as ``replaces`` says. ``definition`` and ``replaces`` follow the constraint's name (``FOREIGN KEY ...``)."""

    table: str
    name: str
    definition: str
    replaces: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} DROP CONSTRAINT {self.name}"
        yield f"ALTER TABLE {self.table} ADD CONSTRAINT {self.name} {self.definition}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} DROP CONSTRAINT IF EXISTS {self.name}"
        yield f"ALTER TABLE {self.table} ADD CONSTRAINT {self.name} {self.replaces}"


@dataclass(frozen=True)
class Policy(SQLObject):
    """A PostgreSQL row-level security policy: ``definition`` follows ``ON`` its table (``USING (...) WITH CHECK
    (...)``)."""

    name: str
    table: str
    definition: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"CREATE POLICY {self.name} ON {self.table} {self.definition}"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"DROP POLICY IF EXISTS {self.name} ON {self.table}"


@dataclass(frozen=True)
class RowSecurity(SQLObject):
    """Row-level security switched on for a PostgreSQL table (its policies say which rows a role sees), and off
    again when dropped."""

    table: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} ENABLE ROW LEVEL SECURITY"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER TABLE {self.table} DISABLE ROW LEVEL SECURITY"


@dataclass(frozen=True)
class ViewOptions(SQLObject):
    """Options set on an existing PostgreSQL view (``security_invoker``), reset when dropped; ``options`` are
    ``name = value`` pairs, comma-separated."""

    view: str
    options: str

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        yield f"ALTER VIEW {self.view} SET ({self.options})"

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        names = ", ".join(option.split("=")[0].strip() for option in self.options.split(","))
        yield f"ALTER VIEW IF EXISTS {self.view} RESET ({names})"


class Group(SQLObject):
    """Objects made in order (a view after what it reads) and dropped in the reverse order."""

    def __init__(self, *parts: Part) -> None:
        self.parts = parts

    def create(self, scripts: ScriptDirectory) -> Iterator[str]:
        for part in self.parts:
            yield from find(scripts, part, SQLObject).create(scripts)

    def drop(self, scripts: ScriptDirectory) -> Iterator[str]:
        for part in reversed(self.parts):
            yield from find(scripts, part, SQLObject).drop(scripts)


# -- the operations (the cookbook's ReversibleOp, for any SQLObject) -------------------------------


class _ObjectOp(MigrateOperation):
    def __init__(self, target: Part) -> None:
        self.target = target

    @classmethod
    def apply(cls, operations: Operations, target: Part) -> None:
        operations.invoke(cls(target))

    def statements(self, scripts: ScriptDirectory) -> Iterator[str]:
        raise NotImplementedError


@Operations.register_operation("create_object", "apply")
@Operations.register_operation("replace_object", "replace")
class CreateObjectOp(_ObjectOp):
    def statements(self, scripts: ScriptDirectory) -> Iterator[str]:
        return find(scripts, self.target, SQLObject).create(scripts)

    @classmethod
    def replace(
        cls, operations: Operations, target: Part, replaces: str | None = None, replace_with: str | None = None
    ) -> None:
        """In an upgrade, drop the object ``replaces`` names and create ``target``; in its downgrade, drop
        ``target`` and create the object ``replace_with`` names again."""
        old: Part
        new: Part
        if replaces is not None and replace_with is None:
            old, new = replaces, target
        elif replace_with is not None and replaces is None:
            old, new = target, replace_with
        else:
            raise TypeError("replace_object takes replaces= (in an upgrade) or replace_with= (in a downgrade)")
        operations.invoke(DropObjectOp(old))
        operations.invoke(CreateObjectOp(new))


@Operations.register_operation("drop_object", "apply")
class DropObjectOp(_ObjectOp):
    def statements(self, scripts: ScriptDirectory) -> Iterator[str]:
        return find(scripts, self.target, SQLObject).drop(scripts)


@Operations.implementation_for(CreateObjectOp)
@Operations.implementation_for(DropObjectOp)
def _run(operations: Operations, operation: _ObjectOp) -> None:
    scripts = operations.get_context().script  # where the names are looked up
    if scripts is None:
        raise LookupError("SQL objects are made by revisions that Alembic runs from its script directory")
    for statement in operation.statements(scripts):
        operations.execute(statement)
