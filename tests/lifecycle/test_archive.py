"""The archive (embrasure/lifecycle/archive.py, docs/operations.md#retention-and-the-archive)
on real directories: a local path, a file:// URL, fsspec's in-memory filesystem for the
object-store write path, and real tmpfs mounts for a full and a read-only filesystem."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from embrasure.errors import ArchiveCorrupt, ArchiveUnavailable
from embrasure.lifecycle import segments
from embrasure.lifecycle.archive import LEVEL, Archive, ArchivedDelivery, Segment
from embrasure.lifecycle.segments import ranges_of


def delivery(seq: int, body: bytes | None = None) -> ArchivedDelivery:
    return ArchivedDelivery(
        seq=seq,
        delivery_id=str(uuid.UUID(int=seq)),
        provider_key=f"producer-{seq % 3}",
        received_at=f"2026-11-30T09:00:{seq % 60:02d}.000000Z",
        body=b'{"eventType":"COMPLETE","n":%d}' % seq if body is None else body,
    )


def segment_file(root: Path, segment: Segment) -> Path:
    return root / "segments" / f"{segment.name}.jsonl.zst"


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# -- round trip -------------------------------------------------------------------------

bodies = st.one_of(
    st.binary(max_size=2000),  # odd bytes, empty, invalid UTF-8
    st.text(max_size=500).map(lambda t: t.encode("utf-8")),  # any valid UTF-8
    st.sampled_from([b"", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b'"\\', b"\xef\xbb\xbf{}"]),
)


@given(st.lists(bodies, min_size=1, max_size=20), st.sampled_from(["path", "file", "memory"]))
def test_bodies_read_back_byte_identical(payloads: list[bytes], where: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        location = {
            "path": tmp,
            "file": f"file://{tmp}",
            "memory": f"memory://archive-{uuid.uuid4().hex}",
        }[where]
        archive = Archive(location)
        sent = [delivery(100 + 2 * i, body) for i, body in enumerate(payloads)]
        segment = archive.write_segment(sent)
        assert segment.count == len(sent) and segment.seqs == tuple(d.seq for d in sent)
        assert archive.read_segment(segment) == sent
        # A new reader, with nothing cached, finds them through the manifest alone.
        again = Archive(location).bodies(d.seq for d in sent)
        assert [again[d.seq] for d in sent] == sent


def test_a_large_body_reads_back(tmp_path: Path) -> None:
    large = os.urandom(3 * 1024 * 1024) + "événement".encode() * 100_000
    archive = Archive(str(tmp_path))
    segment = archive.write_segment([delivery(1, large), delivery(2, large[:-1])])
    assert [d.body for d in archive.read_segment(segment)] == [large, large[:-1]]


def test_utf8_bodies_are_stored_as_text_and_others_as_base64(tmp_path: Path) -> None:
    """The documented format: zstdcat | jq shows a JSON body as itself."""
    archive = Archive(str(tmp_path))
    segment = archive.write_segment([delivery(1, b'{"a":"\xc3\xa9"}'), delivery(2, b"\xff\xfe")])
    raw = zstandard.ZstdDecompressor().decompress(segment_file(tmp_path, segment).read_bytes())
    first, second = (orjson.loads(line) for line in raw.splitlines())
    assert first["body"] == '{"a":"é"}' and "body_base64" not in first
    assert second["body_base64"] == "//4=" and "body" not in second
    assert set(first) - {"body"} == {"seq", "delivery_id", "provider_key", "received_at"}


def test_a_segment_needs_deliveries_each_once(tmp_path: Path) -> None:
    archive = Archive(str(tmp_path))
    with pytest.raises(ValueError):
        archive.write_segment([])
    with pytest.raises(ValueError):
        archive.write_segment([delivery(1), delivery(1)])
    assert archive.segments() == [] and files(tmp_path) == set()


# -- the manifest -----------------------------------------------------------------------


def test_the_manifest_is_the_union_of_every_writers_entries(tmp_path: Path) -> None:
    one, other = Archive(str(tmp_path)), Archive(f"file://{tmp_path}")
    a = one.write_segment([delivery(s) for s in range(1, 11)])
    b = other.write_segment([delivery(s) for s in range(11, 21)])
    c = one.write_segment([delivery(s) for s in (21, 23, 25)])
    everyone = [a, b, c]
    assert Archive(str(tmp_path)).segments() == everyone
    # Each writer sees the other's segments: bodies() lists the manifest again when a
    # seq is in no segment it knows.
    assert one.bodies([15])[15] == delivery(15)
    assert other.segments() == everyone
    assert len(list((tmp_path / "manifest").iterdir())) == 3


def test_segment_names_are_unique_for_the_same_seqs(tmp_path: Path) -> None:
    """Two writers racing over the same stretch of the log (verify then reports it)."""
    archive = Archive(str(tmp_path))
    names = {archive.write_segment([delivery(s) for s in (5, 6)]).name for _ in range(20)}
    assert len(names) == 20 and all(n.startswith("000000000005-000000000006-") for n in names)


def test_interleaved_segments_are_not_duplicates(tmp_path: Path) -> None:
    """A quarantined delivery replayed later is archived in a later pass, its seq inside
    an earlier segment's span: found, and not reported as archived twice."""
    archive = Archive(str(tmp_path))
    archive.write_segment([delivery(s) for s in (1, 2, 3, 5, 6, 9)])
    archive.write_segment([delivery(s) for s in (4, 7, 8)])
    archive.write_segment([delivery(s) for s in (10, 11)])
    wanted = range(1, 12)
    found = Archive(str(tmp_path)).bodies(wanted)
    assert sorted(found) == list(wanted) and all(found[s] == delivery(s) for s in wanted)
    report = archive.verify((s, hashlib.sha256(delivery(s).body).hexdigest()) for s in wanted)
    assert report.ok, report.problems
    assert report.deliveries == 11 and report.expected == 11


@given(st.lists(st.sets(st.integers(1, 40), min_size=1), min_size=1, max_size=6))
def test_any_segments_are_found_and_checked(groups: list[set[int]]) -> None:
    """Segments of any seqs, interleaved or overlapping: every seq is found in a segment
    that holds it, and verify passes exactly when no seq is in two segments."""
    location = f"memory://bucket-{uuid.uuid4().hex}"
    writer = Archive(location)
    made = [writer.write_segment([delivery(s) for s in group]) for group in groups]
    union = set().union(*groups)
    archive = Archive(location)
    found = archive.bodies(range(0, 42))
    assert found == {s: delivery(s) for s in union}
    for seq in union:
        segment = archive.find(seq)
        assert segment is not None and segment.holds(seq) and segment in made
    doubled = sum(len(g) for g in groups) != len(union)
    report = archive.verify(expected_of(range(1, 41)))
    assert all(c.problem is None for c in report.checks)
    in_no_segment = [p for p in report.problems if "in no segment" in p]
    assert len(in_no_segment) == (len(union) < 40)
    assert (len(report.problems) > len(in_no_segment)) == doubled


def test_bodies_reads_each_segment_once_in_seq_order(tmp_path: Path) -> None:
    writer = Archive(str(tmp_path))
    for start in range(1, 501, 100):
        writer.write_segment([delivery(s) for s in range(start, start + 100)])
    archive = Archive(str(tmp_path))
    reads: list[str] = []
    read = archive.read_segment

    def counted(segment: Segment) -> list[ArchivedDelivery]:
        reads.append(segment.name)
        return read(segment)

    archive.read_segment = counted  # type: ignore[method-assign]
    for start in range(1, 501, 20):  # reproject's batches
        batch = archive.bodies(range(start, start + 20))
        assert sorted(batch) == list(range(start, start + 20))
    assert len(reads) == len(set(reads)) == 5
    assert archive.bodies([0, 501]) == {}


def test_a_seq_in_no_segment_is_left_out(tmp_path: Path) -> None:
    archive = Archive(str(tmp_path))
    assert archive.bodies([1, 2]) == {}
    archive.write_segment([delivery(2)])
    assert archive.bodies([1, 2, 3]) == {2: delivery(2)}
    assert archive.find(2) is not None and archive.find(3) is None


def test_a_partial_segment_without_an_entry_counts_for_nothing(tmp_path: Path) -> None:
    archive = Archive(str(tmp_path))
    good = archive.write_segment([delivery(1), delivery(2)])
    partial = tmp_path / "segments" / "000000000003-000000000004-0123456789ab.jsonl.zst"
    partial.write_bytes(segment_file(tmp_path, good).read_bytes()[:20])
    assert Archive(str(tmp_path)).segments() == [good]
    assert archive.bodies([3, 4]) == {}
    report = archive.verify()
    assert report.ok and report.unlisted == ("000000000003-000000000004-0123456789ab",)


def test_discard_removes_the_segment_and_its_entry(tmp_path: Path) -> None:
    archive = Archive(str(tmp_path))
    kept = archive.write_segment([delivery(1)])
    orphan = archive.write_segment([delivery(1)])  # the crash-then-rerun case
    assert not archive.verify().ok
    archive.discard(orphan)
    assert archive.segments() == [kept] and Archive(str(tmp_path)).segments() == [kept]
    assert archive.verify().ok and archive.bodies([1]) == {1: delivery(1)}
    assert files(tmp_path) == {
        f"segments/{kept.name}.jsonl.zst",
        f"manifest/{kept.name}.json",
    }
    archive.discard(orphan)  # twice (a rerun after a crash mid-discard) is harmless


# -- verify -----------------------------------------------------------------------------


@pytest.fixture
def archived(tmp_path: Path) -> tuple[Path, list[Segment]]:
    archive = Archive(str(tmp_path))
    made = [
        archive.write_segment([delivery(s) for s in range(start, start + 50)])
        for start in (1, 51, 101)
    ]
    return tmp_path, made


def expected_of(seqs: range) -> list[tuple[int, str]]:
    return [(s, hashlib.sha256(delivery(s).body).hexdigest()) for s in seqs]


def test_verify_passes_a_good_archive(archived: tuple[Path, list[Segment]]) -> None:
    root, made = archived
    report = Archive(str(root)).verify(expected_of(range(1, 151)))
    assert report.ok and report.problems == () and report.unlisted == ()
    assert [c.segment for c in report.checks] == made
    assert all(c.problem is None for c in report.checks)
    assert report.deliveries == 150 and report.expected == 150


def test_verify_finds_trimmed_deliveries_missing_or_different(
    archived: tuple[Path, list[Segment]],
) -> None:
    root, _ = archived
    expected = expected_of(range(1, 151)) + expected_of(range(200, 203))
    expected[9] = (10, hashlib.sha256(b"another body").hexdigest())
    report = Archive(str(root)).verify(expected)
    assert not report.ok and all(c.problem is None for c in report.checks)
    assert report.problems == (
        "3 deliveries trimmed but in no segment: seqs 200-202",
        "1 delivery archived with a body whose SHA-256 is not the one the database "
        "recorded: seqs 10",
    )


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (flip_a_byte, "SHA-256"),
        (lambda p: p.write_bytes(p.read_bytes()[:-7]), "(truncated)"),
        (lambda p: p.unlink(), "listed in the manifest but its file is missing"),
    ],
    ids=["flipped-byte", "truncated", "deleted"],
)
def test_verify_names_a_damaged_segment(
    archived: tuple[Path, list[Segment]], damage: object, says: str
) -> None:
    root, made = archived
    assert callable(damage)
    damage(segment_file(root, made[1]))
    archive = Archive(str(root))
    report = archive.verify(expected_of(range(1, 151)))
    assert not report.ok
    assert [c.problem is None for c in report.checks] == [True, False, True]
    problem = report.checks[1].problem
    assert problem is not None and made[1].name in problem and says in problem
    assert report.problems == (
        problem,
        f"50 deliveries trimmed, archived in damaged segment {made[1].name}",
    )
    with pytest.raises(ArchiveCorrupt, match=made[1].name):
        archive.read_segment(made[1])
    with pytest.raises(ArchiveCorrupt, match=made[1].name):
        archive.bodies([60])
    assert sorted(archive.bodies(range(1, 51))) == list(range(1, 51))


def test_verify_reports_a_delivery_in_two_segments(archived: tuple[Path, list[Segment]]) -> None:
    root, made = archived
    archive = Archive(str(root))
    again = archive.write_segment([delivery(s) for s in (50, 51, 52, 200)])
    report = archive.verify()
    assert all(c.problem is None for c in report.checks)
    assert report.problems == (
        f"segments {made[0].name} and {again.name} both hold seqs 50 (1 delivery archived twice)",
        f"segments {again.name} and {made[1].name} both hold seqs 51-52 "
        "(2 deliveries archived twice)",
    )


def test_a_segment_whose_entry_lists_other_seqs_is_damaged(
    archived: tuple[Path, list[Segment]],
) -> None:
    """A hash is only as good as the entry: the contents are checked against it too."""
    root, made = archived
    entry = root / "manifest" / f"{made[2].name}.json"
    doc = orjson.loads(entry.read_bytes())
    doc.update(first_seq=102, count=49, ranges=[[102, 150]])
    entry.write_bytes(orjson.dumps(doc))
    report = Archive(str(root)).verify()
    assert report.problems == (
        f"segment {made[2].name} holds other seqs than its manifest entry lists",
    )


def test_an_unreadable_manifest_entry_is_named(archived: tuple[Path, list[Segment]]) -> None:
    root, made = archived
    (root / "manifest" / f"{made[0].name}.json").write_bytes(b'{"format": 1, "name": ')
    archive = Archive(str(root))
    with pytest.raises(ArchiveCorrupt, match=f"manifest entry {made[0].name} cannot be read"):
        archive.segments()
    report = archive.verify()
    assert [c.segment for c in report.checks] == made[1:]
    assert len(report.problems) == 1 and made[0].name in report.problems[0]
    assert report.unlisted == ()  # its segment file has an entry, if a damaged one


# -- the location -----------------------------------------------------------------------


def test_a_file_url_is_the_same_archive_as_its_path(tmp_path: Path) -> None:
    by_url = Archive(f"file://{tmp_path}/nested/archive")  # created, parents too
    segment = by_url.write_segment([delivery(7)])
    by_path = Archive(str(tmp_path / "nested" / "archive"))
    assert by_path.segments() == [segment] and by_path.bodies([7]) == {7: delivery(7)}
    assert files(tmp_path / "nested" / "archive") == {
        f"segments/{segment.name}.jsonl.zst",
        f"manifest/{segment.name}.json",
    }


def test_a_location_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    with pytest.raises(ArchiveUnavailable, match="Protocol not known: nosuch"):
        Archive("nosuch://bucket/prefix")
    missing = tmp_path / "typo"
    with pytest.raises(ArchiveUnavailable, match=f"{missing}.*no such directory"):
        Archive(str(missing), create=False)
    assert not missing.exists()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ArchiveUnavailable, match="a-file"):
        Archive(str(tmp_path / "a-file"))


def mount_tmpfs(target: Path, options: str) -> None:
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A directory for a tmpfs of the test's making, unmounted afterwards."""
    target = tmp_path / "mnt"
    target.mkdir()
    yield target
    if os.path.ismount(target):
        subprocess.run(["umount", str(target)], check=True)


def make_read_only(root: Path) -> str:
    """Root ignores permission bits, so as root the filesystem itself goes read-only."""
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-o", "remount,ro", str(root)], capture_output=True)
        assert done.returncode == 0, done.stderr
        return "Read-only file system (EROFS)"
    for d in (root, root / "segments", root / "manifest"):
        d.chmod(0o555)
    return "Permission denied (EACCES)"


def test_a_read_only_archive_refuses_a_segment_and_lists_no_entry(mounted: Path) -> None:
    if os.geteuid() == 0:
        mount_tmpfs(mounted, "size=4m")
    archive = Archive(str(mounted))
    before = archive.write_segment([delivery(1)])
    why = make_read_only(mounted)
    try:
        with pytest.raises(ArchiveUnavailable) as caught:
            archive.write_segment([delivery(2)])
        message = str(caught.value)
        assert message.startswith(f"archive {mounted}: cannot write segment {mounted}/segments/")
        assert message.endswith(why)
        assert Archive(str(mounted)).segments() == [before]
        assert files(mounted) == {
            f"segments/{before.name}.jsonl.zst",
            f"manifest/{before.name}.json",
        }
        assert Archive(str(mounted), create=False).verify().ok  # reading needs no write
    finally:
        if os.geteuid() != 0:  # pytest must be able to remove it
            for d in (mounted, mounted / "segments", mounted / "manifest"):
                d.chmod(0o755)


def test_a_full_archive_refuses_a_segment_and_leaves_nothing(mounted: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a full filesystem needs a tmpfs mount, which needs root")
    mount_tmpfs(mounted, "size=256k")
    archive = Archive(str(mounted))
    before = archive.write_segment([delivery(1)])
    incompressible = os.urandom(1024 * 1024)
    with pytest.raises(ArchiveUnavailable) as caught:
        archive.write_segment([delivery(2, incompressible)])
    assert str(caught.value).endswith("No space left on device (ENOSPC)")
    assert f"cannot write segment {mounted}/segments/000000000002-000000000002-" in str(
        caught.value
    )
    assert Archive(str(mounted)).segments() == [before]
    assert files(mounted) == {f"segments/{before.name}.jsonl.zst", f"manifest/{before.name}.json"}
    assert archive.bodies([1, 2]) == {1: delivery(1)}
    # Space again (the operator grows the volume): the next write succeeds.
    assert archive.write_segment([delivery(2, incompressible[:1000])]).count == 1


def test_space_for_the_segment_but_not_its_entry_leaves_nothing(mounted: Path) -> None:
    """The segment is durable and read back, then its manifest entry finds the disk full:
    no entry, and the segment file is removed."""
    if os.geteuid() != 0:
        pytest.skip("a full filesystem needs a tmpfs mount, which needs root")
    mount_tmpfs(mounted, "size=64k")
    archive = Archive(str(mounted))
    before = archive.write_segment([delivery(1)])
    stat = os.statvfs(mounted)
    free = stat.f_bavail * stat.f_frsize
    noise = os.urandom(free)

    def blob_size(n: int) -> int:
        data = segments.encode_lines([delivery(2, noise[:n])])
        return len(zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).compress(data))

    lo, hi = 0, free  # the longest body whose segment still fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if blob_size(mid) <= free else (lo, mid - 1)
    assert free - stat.f_frsize < blob_size(lo) <= free  # it takes every free page
    with pytest.raises(ArchiveUnavailable) as caught:
        archive.write_segment([delivery(2, noise[:lo])])
    assert "cannot write the manifest entry" in str(caught.value)
    assert str(caught.value).endswith("No space left on device (ENOSPC)")
    assert files(mounted) == {f"segments/{before.name}.jsonl.zst", f"manifest/{before.name}.json"}
    assert Archive(str(mounted)).segments() == [before]


WRITER = """
import os, sys
from embrasure.lifecycle.archive import Archive, ArchivedDelivery
segment = Archive(sys.argv[1]).write_segment([ArchivedDelivery(1, "d", "p", "t", b"{}")])
os.write(1, ("RETURNED " + segment.name).encode())
"""


def test_write_segment_returns_after_fsync_read_back_and_entry(tmp_path: Path) -> None:
    """The order of the system calls, seen by strace: segment written and fsync'd, its
    directory fsync'd, read back, entry fsync'd and renamed into place, the manifest
    directory fsync'd, and only then does write_segment return."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not on PATH (CI installs it: apt-get install -y strace)")
    root, trace = tmp_path / "archive", tmp_path / "trace"
    calls = "trace=openat,write,fsync,fdatasync,rename,renameat,renameat2,mkdir"
    done = subprocess.run(
        [
            strace,
            "-f",
            "-yy",
            "-e",
            calls,
            "-o",
            str(trace),
            sys.executable,
            "-c",
            WRITER,
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.removeprefix("RETURNED ")
    segment, entry = f"{root}/segments/{name}.jsonl.zst", f"{root}/manifest/{name}.json"
    lines = trace.read_text().splitlines()

    def first(after: int, *parts: str) -> int:
        for i in range(after + 1, len(lines)):
            if all(p in lines[i] for p in parts):
                return i
        raise AssertionError(f"no call with {parts} after line {after}: {lines[after:]}")

    opened = first(-1, "openat(", f'"{segment}"', "O_EXCL")
    synced = first(opened, "fsync(", f"<{segment}>")
    directory = first(synced, "fsync(", f"<{root}/segments>")
    read_back = first(directory, "openat(", f'"{segment}"', "O_RDONLY")
    temporary = first(read_back, "fsync(", f"<{root}/manifest/.{name}.json.")
    renamed = first(temporary, "rename", f'"{entry}"')
    listed = first(renamed, "fsync(", f"<{root}/manifest>")
    first(listed, "write(1", "RETURNED")


def test_the_object_store_path_lists_and_verifies(tmp_path: Path) -> None:
    """fsspec's memory filesystem takes the same path as s3:// (pipe_file, cat_file, ls)."""
    location = f"memory://bucket-{uuid.uuid4().hex}/prefix"
    archive = Archive(location)
    made = [archive.write_segment([delivery(s) for s in range(k, k + 10)]) for k in (1, 11)]
    assert Archive(location).segments() == made
    assert archive.verify(expected_of(range(1, 21))).ok
    archive.discard(made[0])
    assert Archive(location).segments() == made[1:]


def test_ranges_are_compact() -> None:
    assert ranges_of([1, 2, 3, 7, 9, 10]) == ((1, 3), (7, 7), (9, 10))
    segment = Segment("n", 1, 10, 6, "", 0, "", ((1, 3), (7, 7), (9, 10)))
    assert segment.seqs == (1, 2, 3, 7, 9, 10)
    assert [s for s in range(12) if segment.holds(s)] == [1, 2, 3, 7, 9, 10]
