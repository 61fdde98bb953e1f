"""`embrasure archive verify` (docs/operations.md#retention-and-the-archive) on real
archive directories, through click's CliRunner, and once as a process for its exit code."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from click.testing import CliRunner, Result

from embrasure.cli.main import main
from embrasure.lifecycle.archive import Archive, ArchivedDelivery, Segment

from conftest import one_error_line as shared_error_line


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def archive_of(root: Path, *runs: range) -> list[Segment]:
    archive = Archive(str(root))
    return [
        archive.write_segment(
            [
                ArchivedDelivery(s, str(uuid.UUID(int=s)), "p", "2026-11-30T09:00:00Z", b"{}")
                for s in run
            ]
        )
        for run in runs
    ]


def one_error_line(result: Result) -> str:
    """conftest's one error line, and nothing on stdout."""
    line = shared_error_line(result)
    assert result.stdout == ""
    return line


def test_a_good_archive_passes(tmp_path: Path) -> None:
    made = archive_of(tmp_path, range(1, 11), range(11, 13))
    result = cli("archive", "verify", "--archive", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"ok   {made[0].name}  seqs 1-10  10 deliveries  {made[0].size} bytes",
        f"ok   {made[1].name}  seqs 11-12  2 deliveries  {made[1].size} bytes",
        f"archive {tmp_path}: 2 segments, 12 deliveries: ok",
    ]
    assert result.stderr == ""


def test_the_location_comes_from_the_environment_or_a_file_url(tmp_path: Path) -> None:
    archive_of(tmp_path, range(1, 2))
    by_env = cli("archive", "verify", env={"EMBRASURE_ARCHIVE": f"file://{tmp_path}"})
    assert by_env.exit_code == 0, by_env.output
    assert by_env.stdout.endswith(f"archive file://{tmp_path}: 1 segment, 1 delivery: ok\n")


def test_a_damaged_archive_names_each_bad_segment_and_exits_1(tmp_path: Path) -> None:
    made = archive_of(tmp_path, range(1, 11), range(11, 21), range(21, 31), range(5, 7))
    segments = tmp_path / "segments"
    flipped = segments / f"{made[1].name}.jsonl.zst"
    data = bytearray(flipped.read_bytes())
    data[-5] ^= 0xFF
    flipped.write_bytes(bytes(data))
    (segments / f"{made[2].name}.jsonl.zst").unlink()
    (segments / "000000000040-000000000041-0123456789ab.jsonl.zst").write_bytes(b"partial")
    result = cli("archive", "verify", "--archive", str(tmp_path))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"ok   {made[0].name}  seqs 1-10")
    assert lines[1].startswith(f"ok   {made[3].name}  seqs 5-6")  # by first seq
    assert lines[2].startswith(f"BAD  segment {made[1].name}: SHA-256 ")
    assert lines[3] == (
        f"BAD  segment {made[2].name} is listed in the manifest but its file is missing"
    )
    assert lines[4].startswith("note 000000000040-000000000041-0123456789ab  a segment file")
    assert lines[5] == (
        f"BAD  segments {made[0].name} and {made[3].name} both hold seqs 5-6 "
        "(2 deliveries archived twice)"
    )
    assert len(lines) == 6
    assert result.stderr == f"archive {tmp_path}: 4 segments, 32 deliveries: 3 problems\n"


def test_a_bad_location_is_one_error_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    line = one_error_line(cli("archive", "verify", "--archive", str(missing)))
    assert line == (
        f"embrasure: error: archive {missing}: cannot open {missing}: no such directory (ENOENT)"
    )
    assert not missing.exists()  # verifying never creates an archive
    line = one_error_line(cli("archive", "verify", "--archive", "s3://bucket/prefix"))
    assert "s3fs" in line and "pip install" in line
    line = one_error_line(cli("archive", "verify", env={"EMBRASURE_ARCHIVE": ""}))
    assert "--archive" in line


def test_the_exit_code_as_a_process(tmp_path: Path) -> None:
    made = archive_of(tmp_path, range(1, 3))
    command = [sys.executable, "-m", "embrasure.cli.main", "archive", "verify", "--archive"]
    assert subprocess.run([*command, str(tmp_path)], capture_output=True).returncode == 0
    (tmp_path / "segments" / f"{made[0].name}.jsonl.zst").write_bytes(b"")
    done = subprocess.run([*command, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1
    assert f"BAD  segment {made[0].name}: 0 bytes" in done.stdout
    assert "(truncated)" in done.stdout and "Traceback" not in done.stderr
