"""Where the folders the package reads at run time are: `sql/` (the statements), `alembic/`
(the migrations) and `ext/` (the keyword extension's C sources, `cari.db.extension`).

The repository keeps them at its top level, beside `service/`; the wheel carries them inside the
package (`cari/sql`, `cari/alembic`, `cari/ext/cari_bm25`: pyproject's force-include). So an
installed package finds them beside its modules, and one run from a checkout (an editable
install imports `service/cari`) at the top of the repository, two levels up.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # cari/, this module being in cari/db/


def folder(name: str) -> Path:
    installed = PACKAGE / name
    return installed if installed.is_dir() else PACKAGE.parents[1] / name
