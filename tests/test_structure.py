"""The code base's shape: no import cycle in the package, and every named SQL statement is a
file in `sql/` that PostgreSQL accepts."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cari.queries import SQL_DIR

PACKAGE = Path(__file__).resolve().parents[1] / "service" / "cari"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package's modules that `name` imports anywhere in its file (at the top, inside a
    function, or for type checking only: each is a dependency of its layer)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from cari import db` imports the module cari.db; `from cari.db import x`, cari.db
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(f"{target}."):
                yield target


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "cari.cli.common" in graph["cari.cli.search"]  # the walk sees real imports
    assert "cari.runtime" in graph["cari.cli.common"]  # including those inside functions
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


# -- SQL statements ----------------------------------------------------------------------------

CODE = [PACKAGE, PACKAGE.parents[1] / "alembic", PACKAGE.parents[1] / "bench"]


def _named_statements() -> tuple[dict[str, list[str]], set[str]]:
    """Each statement name passed as a literal to `cari.queries.query` (under any alias) in the
    code, with the files that name it; and every string literal in the code."""
    named: dict[str, list[str]] = {}
    strings: set[str] = set()
    for folder in CODE:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            aliases = {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "cari.queries"
                for alias in node.names
                if alias.name == "query"
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    strings.add(node.value)
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in aliases
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                ):
                    named.setdefault(str(node.args[0].value), []).append(path.name)
    return named, strings


def test_every_named_statement_has_its_file() -> None:
    named, _ = _named_statements()
    assert {"search_keyword", "vocabulary_known"} <= set(named)  # aliases are followed
    missing = {
        name: where for name, where in named.items() if not (SQL_DIR / f"{name}.sql").is_file()
    }
    assert not missing, f"query() names without a file in sql/: {missing}"


def test_every_statement_file_is_used() -> None:
    _, strings = _named_statements()
    unused = [path.name for path in _statements() if path.stem not in strings]
    assert not unused, f"files in sql/ that no code names: {unused}"


def _statements() -> list[Path]:
    return sorted(SQL_DIR.glob("*.sql"))


PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# Values for the fields some statements are composed with by psycopg.sql (literals from
# settings that cannot be parameters): what the defaults give.
# `{filters}` is the empty fragment (tests/test_filters.py covers compiled filters) and
# `{allowed}` (the chunk ids filters allow, for the keyword extension) no filter.
COMPOSED = {
    "dimension": "384",
    "type": "vector(384)",
    "indexed": "embedding::vector(384)",
    "ops": "vector_cosine_ops",
    "index": "chunks_embedding_vector_384_idx",
    "table": "chunks",
    "m": "16",
    "ef_construction": "64",
    "memory": "'64MB'",
    "filters": "",
    "unfolded": "",
    "allowed": "NULL::bigint[]",
    # The keyword statements' shared fragments (cari.search.bm25.keyword_statement).
    "terms": (SQL_DIR / "fragments" / "search_keyword_terms.sql").read_text(encoding="utf-8"),
    "summed": (SQL_DIR / "fragments" / "search_keyword_summed.sql").read_text(encoding="utf-8"),
}
FIELD = re.compile(r"\{(\w+)\}")


PREPARABLE = {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE", "MERGE", "VALUES"}


def _as_prepared(text: str) -> str:
    """`text` as a PREPARE: each named placeholder becomes a numbered parameter ($1 for every
    use of the first name, ...) whose type the server infers."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    return "PREPARE cari_statement AS " + PLACEHOLDER.sub(number, text).replace("%%", "%")


@pytest.mark.parametrize("path", _statements(), ids=lambda path: path.stem)
def test_every_statement_prepares_on_the_migrated_schema(
    path: Path, module_dsn: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL parses, resolves and plans each file against the migrated schema, in a
    transaction that is rolled back: queries as a PREPARE (nothing runs); COPY with no rows;
    DDL composed from settings runs and is undone. DDL that cannot run in a transaction block
    (CONCURRENTLY) runs as the service runs it, autocommitted, in a database of its own."""
    text = path.read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    while (composed := FIELD.sub(lambda f: COMPOSED.get(f.group(1), f.group(0)), body)) != body:
        body = composed  # a fragment holds fields of its own
    verb = body.split(maxsplit=1)[0].upper()
    if " CONCURRENTLY " in body.split("\n", 1)[0].upper():
        with psycopg.connect(request.getfixturevalue("dsn"), autocommit=True) as conn:
            conn.execute(body.encode())
        return
    with psycopg.connect(module_dsn) as conn, conn.transaction(force_rollback=True):
        if verb in PREPARABLE:
            conn.execute(_as_prepared(body).encode())
        elif verb == "COPY":
            with conn.cursor().copy(body.encode()):
                pass
        else:  # DDL and SET: run it, undone with the transaction
            assert not PLACEHOLDER.search(body), "only queries take parameters"
            if "EXTENSION cari_bm25" in body and not _has_keyword_extension(conn):
                pytest.skip("this server does not have Cari's keyword extension")
            conn.execute(body.encode())


def _has_keyword_extension(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the server has cari_bm25 (the embedded server builds it; a test server of one's
    own, a pgvector container say, may not)."""
    found = conn.execute("SELECT FROM pg_available_extensions WHERE name = 'cari_bm25'")
    return found.fetchone() is not None


# -- exceptions --------------------------------------------------------------------------------


def test_every_exception_type_lives_in_errors_and_its_tree() -> None:
    """Exception classes are defined in cari/errors.py only, and its docstring's tree names each
    under its real base."""
    import cari.errors

    elsewhere = [
        f"{name}.{node.name}"
        for name, path in _modules().items()
        if name != "cari.errors"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any(
            isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception")) for b in node.bases
        )
    ]
    assert not elsewhere, f"exception types outside cari/errors.py: {elsewhere}"
    defined = {
        name: value
        for name, value in vars(cari.errors).items()
        if isinstance(value, type) and issubclass(value, Exception)
    }
    tree = (cari.errors.__doc__ or "").split("\n\n", 1)[1]  # below the summary
    entry = re.compile(r"^([│├└─ ]*)([A-Z]\w+) {2,}", re.MULTILINE)  # a name, then its column
    parents: list[tuple[int, str]] = []  # the entries above, by indentation
    listed = {}
    for match in entry.finditer(tree):
        depth, name = len(match.group(1)), match.group(2)
        while parents and parents[-1][0] >= depth:
            parents.pop()
        listed[name] = parents[-1][1] if parents else "Exception"
        parents.append((depth, name))
    assert set(listed) == set(defined)
    assert listed["NotFoundError"] == "APIError"  # the tree is read at every depth
    for name, parent in listed.items():
        assert defined[name].__bases__[0].__name__ == parent, name
