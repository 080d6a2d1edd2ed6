"""docs/cli.md is the real `--help` of every command; regenerate with
`python -m tests.test_cli_docs` after changing the CLI."""

from pathlib import Path

import click
from click.testing import CliRunner

from cari.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _commands(group: click.Group, prefix: list[str]) -> list[list[str]]:
    found = [prefix]
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            found += _commands(command, [*prefix, name])
        else:
            found.append([*prefix, name])
    return found


def render() -> str:
    parts = ["# Command line\n\nGenerated from `cari … --help`.\n"]
    runner = CliRunner()
    for path in _commands(main, []):
        result = runner.invoke(main, [*path, "--help"], prog_name="cari", terminal_width=100)
        assert result.exit_code == 0, result.output
        title = " ".join(["cari", *path])
        parts.append(f"## `{title}`\n\n```\n{result.output.rstrip()}\n```\n")
    return "\n".join(parts)


def test_cli_docs_are_current() -> None:
    assert DOCS.read_text() == render(), "docs/cli.md is stale: python -m tests.test_cli_docs"


if __name__ == "__main__":
    DOCS.write_text(render())
