"""Cari's keyword extension (`cari_bm25`, C, in `ext/cari_bm25`) built for the embedded server.

It is compiled with PGXS against the server's own `pg_config` (the embedded wheel ships it, the
server's headers and PGXS) into a folder Cari owns, `<data_dir>/ext/<major>-<key>/`:
`share/extension/` (control and SQL files) and `lib/` (the shared library). The server finds
them through PostgreSQL 18's `extension_control_path` and `dynamic_library_path`, which
`cari.db.embedded` writes to `cari.conf`; nothing is written into the wheel or any other package.

Built once: `key` hashes the sources, the server's version and this recipe, so a later start
finds the folder and builds nothing; a change of any of them builds a new one. Built atomically:
in a temporary folder beside it, renamed into place when complete, under a lock, so two
processes starting at once build it once and never see half a folder.

Where it cannot be built (no C compiler, no make, no server headers, a failed compile) `build`
says so once, naming what to install, and returns None: the SQL statement serves keyword search.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cari.db.resources import folder
from cari.errors import Unbuildable
from cari.files import locked

NAME = "cari_bm25"
# Changed when the way it is built changes, so every folder built the old way is rebuilt.
RECIPE = "1"
BUILD_TIMEOUT_S = 600
# What a build leaves in a source folder (a developer's `make`): neither copied nor hashed.
BUILD_OUTPUTS = (
    "*.o",
    "*.so",
    "*.bc",
    "*.dylib",
    ".deps",
    "results",
    "regression.*",
    "log",
    "tmp_check",
)
# What the embedded server is told in cari.conf (`Built.server_config`).
SERVER_SETTINGS = ("extension_control_path", "dynamic_library_path")
_INSTALL_HINT = (
    "Debian/Ubuntu: `apt-get install gcc make`, or build-essential; then start Cari again"
)

_log = logging.getLogger(__name__)
_said: set[str] = set()


@dataclass(frozen=True, slots=True)
class Built:
    """A complete build: `folder` holds `share/extension/` and `lib/`."""

    folder: Path
    version: str  # the control file's default_version

    def server_config(self) -> dict[str, str]:
        """The settings that let the server find it, after its own folders."""
        return {
            "extension_control_path": f"$system:{self.folder / 'share'}",
            "dynamic_library_path": f"$libdir:{self.folder / 'lib'}",
        }


def sources() -> Path:
    """The extension's source folder: `ext/cari_bm25` in a checkout, `cari/ext/cari_bm25` in the
    installed wheel (pyproject's force-include)."""
    return folder("ext") / NAME


def fall_back(reason: str, told: Path | None = None) -> None:
    """Say once per process why keyword search runs on the SQL statement. With `told`, a file
    that keeps what was said, once per data folder as well until the reason changes: every
    `cari` command starts the embedded server, and each printed the same warning."""
    if _said:
        return
    _said.add(reason)
    message = f"{reason}; keyword search runs on the SQL statement (same results, slower)"
    try:
        if told is not None and told.read_text() == message:
            _log.info("%s", message)
            return
    except OSError:
        pass  # not said before
    _log.warning("%s", message)
    if told is not None:
        with contextlib.suppress(OSError):
            told.parent.mkdir(parents=True, exist_ok=True)
            told.write_text(message)


def build(data_dir: Path, pg_config: Path) -> Built | None:
    """The extension built for the server of `pg_config` under `data_dir/ext`, reused when
    built before; None (said once) when it cannot be built here."""
    try:
        return build_in(data_dir / "ext", pg_config)
    except Unbuildable as exc:
        reason = str(exc)
    except OSError as exc:  # the data folder's disk full, say
        reason = f"its folder could not be written ({exc})"
    fall_back(
        f"Cari's keyword extension {NAME} cannot be built here: {reason}",
        told=data_dir / "ext" / "unbuildable.txt",
    )
    return None


def build_in(root: Path, pg_config: Path, src: Path | None = None) -> Built:
    """The extension built from `src` (Cari's own sources by default) for the server of
    `pg_config` in a folder under `root` named by its key, reused when built before; raises
    Unbuildable when it cannot be built."""
    src = src or sources()
    control = src / f"{NAME}.control"
    if not control.is_file():
        raise Unbuildable(f"its sources are missing ({src})")
    version = default_version(control)
    server = _pg_config(pg_config, "--version")  # e.g. "PostgreSQL 18.6"
    final = root / f"{_major(server)}-{key(src, server)}"
    if final.is_dir():
        return Built(final, version)
    make, compiler = _tools(pg_config)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)  # as root the embedded server runs as a user of its own, who reads it
    with locked(root / ".lock"):
        if final.is_dir():  # another process built it while this one waited
            return Built(final, version)
        for stale in root.glob(".build-*"):  # a build killed half way: none runs but this one
            shutil.rmtree(stale, ignore_errors=True)
        _log.info("building %s for %s into %s", NAME, server, final)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        try:
            out = _compile(src, work, pg_config, make, compiler)
            os.rename(out, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return Built(final, version)


def default_version(control: Path) -> str:
    """The `default_version` a control file names."""
    found = re.search(r"^\s*default_version\s*=\s*'([^']*)'", control.read_text(), re.M)
    if not found:
        raise Unbuildable(f"{control} names no default_version")
    return found.group(1)


def key(src: Path, server: str) -> str:
    """A hash of the sources, the server's version and the recipe: the build's name."""
    digest = hashlib.sha256(f"{RECIPE}\0{server}\0".encode())
    for path in source_files(src):
        digest.update(f"{path.relative_to(src)}\0".encode())
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def source_files(src: Path) -> list[Path]:
    """The files of the sources the build copies and hashes: all but what a build leaves."""
    ignored = shutil.ignore_patterns(*BUILD_OUTPUTS)
    found = []
    for here, dirs, files in os.walk(src):
        skip = ignored(here, [*dirs, *files])
        dirs[:] = sorted(d for d in dirs if d not in skip)
        found += [Path(here, f) for f in sorted(files) if f not in skip]
    return found


def _major(server: str) -> str:
    found = re.search(r"(\d+)", server)
    return found.group(1) if found else "pg"


def _pg_config(pg_config: Path, *args: str) -> str:
    try:
        result = subprocess.run(
            [str(pg_config), *args], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unbuildable(f"the server's pg_config ({pg_config}) does not answer: {exc}") from None
    return result.stdout.strip()


def _tools(pg_config: Path) -> tuple[str, str]:
    """make and the C compiler (CC, else the one the server was built with, else cc), after
    checking the server's headers and PGXS are there."""
    headers = Path(_pg_config(pg_config, "--includedir-server"), "postgres.h")
    pgxs = Path(_pg_config(pg_config, "--pgxs"))
    if not (headers.is_file() and pgxs.is_file()):
        raise Unbuildable(
            f"the server's headers or PGXS are missing ({headers}, {pgxs}): install them "
            "(Debian/Ubuntu: `apt-get install postgresql-server-dev-<major>`)"
        )
    make = shutil.which("make")
    if make is None:
        raise Unbuildable(f"no `make` found on PATH: install it ({_INSTALL_HINT})")
    wanted = os.environ.get("CC") or _pg_config(pg_config, "--cc").split()[0] or "cc"
    compiler = shutil.which(wanted) or (None if "CC" in os.environ else shutil.which("cc"))
    if compiler is None:
        raise Unbuildable(f"no C compiler found (`{wanted}`): install one ({_INSTALL_HINT})")
    return make, compiler


def _compile(src: Path, work: Path, pg_config: Path, make: str, compiler: str) -> Path:
    """Build a copy of `src` in `work` and lay out what it installs: the folder to rename."""
    copy = work / "src"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns(*BUILD_OUTPUTS))
    dest = work / "dest"
    command = [
        make,
        "-C",
        str(copy),
        f"PG_CONFIG={pg_config}",
        f"CC={compiler}",
        f"CFLAGS={_cflags(pg_config, compiler, work)}",
        "install",
        f"DESTDIR={dest}",
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unbuildable(f"`make install` could not run: {exc}") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).splitlines()
        errors = [line for line in output if re.search(r"\berror\b", line, re.I)]
        errors = errors or output[-1:]
        raise Unbuildable(f"its build failed: {' '.join(errors[:3])[:500]}")
    out = work / "out"
    # Installed under DESTDIR at the server's own paths, which are absolute.
    share = dest / _pg_config(pg_config, "--sharedir").lstrip("/") / "extension"
    lib = dest / _pg_config(pg_config, "--pkglibdir").lstrip("/")
    for source, target in ((share, out / "share" / "extension"), (lib, out / "lib")):
        target.mkdir(parents=True)
        for file in source.glob(f"{NAME}*"):
            if file.is_file():
                shutil.copy2(file, target / file.name)
    installed = [*(out / "lib").iterdir(), *(out / "share" / "extension").glob("*.control")]
    if len(installed) < 2:
        raise Unbuildable(f"`make install` installed no {NAME} library or control file")
    _readable(out)
    return out


def _cflags(pg_config: Path, compiler: str, work: Path) -> str:
    """The server's CFLAGS less those this compiler refuses: the wheel's pg_config records the
    flags of a newer gcc than a machine may have (gcc 12 refuses
    -Wmissing-variable-declarations)."""
    flags = _pg_config(pg_config, "--cflags").split()
    probe = work / "probe.c"
    probe.write_text("int cari_probe(void);\nint cari_probe(void) { return 0; }\n")

    def accepted(*tried: str) -> bool:
        command = [compiler, "-Werror", *tried, "-c", str(probe), "-o", str(work / "probe.o")]
        try:
            return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    if not accepted():
        raise Unbuildable(f"the C compiler {compiler} does not compile a one-line program")
    if accepted(*flags):
        return " ".join(flags)
    return " ".join(flag for flag in flags if accepted(flag))


def _readable(out: Path) -> None:
    """Readable by everyone: as root the embedded server runs as a user of its own."""
    for path in [out, *out.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path.suffix == ".so" else 0o644)
