"""The shell examples of README.md and docs/**/*.md, run, so the docs cannot go stale.

The convention (docs/architecture.md#a-runnable-example-in-the-docs): an HTML comment on the line
before a fence marks the block runnable; rendered Markdown does not show it.

    <!-- runnable -->          the block runs against a server holding the demo
    <!-- runnable: fresh -->   the block runs against a server on an empty database

- A ```sh block is run whole by ``bash -euo pipefail``: it passes when it exits 0.
- A ```console block holds ``$ command`` lines (a line ending in ``\\`` continues), each
  followed by what it prints. Each command runs in turn, in one bash, and must exit 0;
  every line it is shown to print must be among the lines it printed (stdout and stderr),
  compared with runs of blanks made one (a table's column widths follow its contents);
  a ``…`` in a shown line stands for any text (a time taken, an id), and blank lines
  are not compared.

Every block gets its own server (`embrasure serve` on a free port, in a process of its
own) on its own SQLite file, ``embrasure.db`` in a new working directory, so
``--db sqlite:///embrasure.db`` in an example names the file the server serves, and no
block depends on another. The examples write the server's address as the default
``http://127.0.0.1:5000``: the runner puts its server's URL there, and sets
``EMBRASURE_URL`` to it, so a client command with neither --url nor --db reaches it.
``embrasure`` and ``.venv/bin/embrasure`` both run this checkout's code. Examples that
need what this machine lacks (Spark, Airflow, PostgreSQL's createdb, a long-running
`serve`, an archive under /var/lib) are left unmarked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*<!-- runnable(?:: (?P<mode>fresh))? -->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>\w*)\s*$")
DEFAULT_URL = "http://127.0.0.1:5000"
ELISION = "…"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    kind: str  # sh or console
    fresh: bool
    text: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        marked = MARKER.match(line)
        if not marked:
            continue
        opening = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        assert opening and opening["info"] in ("sh", "console"), (
            f"{path.relative_to(ROOT)}:{i + 1}: a runnable marker must stand right before"
            " a ```sh or ```console fence"
        )
        indent, body = opening["indent"], []
        for inner in lines[i + 2 :]:
            if inner.strip() == "```":
                break
            body.append(inner.removeprefix(indent))
        found.append(
            Block(path, i + 2, opening["info"], marked["mode"] == "fresh", "\n".join(body))
        )
    return found


BLOCKS = [b for p in doc_files() for b in blocks_of(p)]


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's (command, the lines shown after it)."""
    out: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    for line in block.text.splitlines():
        if pending:
            pending.append(line)
        elif line.startswith("$ "):
            pending = [line[2:]]
        elif out:
            out[-1][1].append(line)
            continue
        else:
            raise AssertionError(f"{block.id}: output before any `$ ` command: {line!r}")
        if not pending[-1].endswith("\\"):
            out.append(("\n".join(pending), []))
            pending = []
    return out


def squeeze(line: str) -> str:
    return " ".join(line.split())


def shown_as(line: str) -> re.Pattern[str]:
    """A shown line as a pattern over a printed (squeezed) one: ``…`` is any text."""
    return re.compile(".*".join(re.escape(part) for part in squeeze(line).split(ELISION)))


def missing_lines(shown: list[str], printed: str) -> list[str]:
    lines = [squeeze(line) for line in printed.splitlines()]
    return [
        s for s in shown if s.strip() and not any(shown_as(s).fullmatch(line) for line in lines)
    ]


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo loaded once; each block gets a copy (the loading process has exited, so
    its WAL is checkpointed into the file)."""
    db = tmp_path_factory.mktemp("demo") / "embrasure.db"
    subprocess.run(
        [sys.executable, "-m", "embrasure", "demo", "--db", f"sqlite:///{db}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return db


def environment(workdir: Path, url: str) -> dict[str, str]:
    """`embrasure` (and `.venv/bin/embrasure`) running this checkout, EMBRASURE_URL
    naming the block's server, and no other EMBRASURE_* from the test's environment."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "embrasure"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m embrasure "$@"\n')
    wrapper.chmod(0o755)
    (workdir / ".venv" / "bin").mkdir(parents=True)
    (workdir / ".venv" / "bin" / "embrasure").symlink_to(wrapper)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBRASURE_") and k != "COLUMNS"}
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env["PATH"]])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["EMBRASURE_URL"] = url
    env["EMBRASURE_LOG_LEVEL"] = "warning"
    return env


def bash(script: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_example(block: Block, demo_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "embrasure.db"
    if not block.fresh:
        shutil.copyfile(demo_db, db)
    server = ServerProcess(db, log_dir=tmp_path).start()
    try:
        env = environment(tmp_path, server.url)
        if block.kind == "sh":
            done = bash(block.text.replace(DEFAULT_URL, server.url), tmp_path, env)
            assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stderr}"
            return
        for command, shown in commands(block):
            done = bash(command.replace(DEFAULT_URL, server.url), tmp_path, env)
            printed = done.stdout + done.stderr
            assert done.returncode == 0, (
                f"{block.id}: `{command}` exited {done.returncode}:\n{printed}"
            )
            missing = missing_lines(shown, printed)
            assert not missing, (
                f"{block.id}: `{command}` did not print {missing}; it printed:\n{printed}"
            )
    finally:
        server.stop()


def test_shown_output_is_compared_line_by_line() -> None:
    """The comparison can fail: a changed word, a line not printed."""
    printed = "impact of x: 3 downstream\ndistance  type\n1     job    demo\n"
    assert missing_lines(["impact of x: 3 downstream", "1 job demo", ""], printed) == []
    assert missing_lines(["impact of x: … downstream", "…"], printed) == []
    assert missing_lines(["impact of x: 4 downstream"], printed) == ["impact of x: 4 downstream"]
    assert missing_lines(["distance"], printed) == ["distance"]  # whole lines only


def test_the_runner_finds_the_marked_blocks() -> None:
    """A marker the runner misread would drop its block silently: there are some, in the
    README and in docs/, each a ```sh or ```console block with something to run."""
    files = {b.path for b in BLOCKS}
    assert ROOT / "README.md" in files and ROOT / "docs" / "cli.md" in files
    assert all(b.text.strip() for b in BLOCKS)
    assert all(commands(b) for b in BLOCKS if b.kind == "console")
