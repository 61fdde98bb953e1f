"""The log's bodies, zstd-compressed with dictionaries trained from the log.

An OpenLineage producer sends the same shapes again and again (a job's schema, SQL and
column lineage repeat byte for byte in every run), but one 5 KB event is too short for
zstd to find that repetition inside it: alone it compresses to ~17% of its size, with a
dictionary trained from the log's own recent bodies to ~3% (bench/results/storage.md).
So the store keeps dictionaries in ``log_dictionaries`` (docs/architecture.md#storage),
each body names the dictionary it was compressed with, and a body reads back as the exact
bytes received (its SHA-256 is the receipt's).

The codec is used by the appending thread (group commit: zstd releases the GIL while it
compresses, so the event loop keeps running) and by any reader thread; zstd's compressor
and decompressor objects are not thread-safe, so each thread builds its own.

Dictionaries: the first is trained once ``train_after`` small bodies have been appended;
a new one when the traffic changes — when the bodies compressed with the newest
dictionary come out ``retrain_ratio`` times larger, relative to their size, than they did
just after it was adopted. Training runs on a thread of its own (~0.1 s for 2,000
samples), so no delivery waits for it. Dictionaries are never deleted: old bodies name
theirs.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

import zstandard

log = logging.getLogger("embrasure.log")

LEVEL = 3  # zstd's default: ~150k small bodies/s a core, within 3% of level 6's ratio
DICT_SIZE = 64 * 1024
SAMPLE_MAX = 128 * 1024  # bodies up to this size train dictionaries (batches need none)
SAMPLES = 2000  # the most recent small bodies a dictionary is trained from
WINDOW = 1000  # small bodies a ratio is measured over

RAW = None  # dict_id of a body stored as received (compression off, or it did not pay)
NO_DICTIONARY = 0  # dict_id of a body compressed without a dictionary

# Saves a trained dictionary (its bytes, how many samples) and returns its id.
SaveDictionary = Callable[[bytes, int], int]
# Loads a dictionary another process trained, by id.
LoadDictionary = Callable[[int], bytes]


class BodyCodec:
    def __init__(
        self,
        enabled: bool = True,
        *,
        train_after: int = SAMPLES,
        retrain_ratio: float = 1.5,
        window: int = WINDOW,
        check_every: int = 5 * WINDOW,
    ) -> None:
        self.enabled = enabled
        self.train_after = train_after
        self.retrain_ratio = retrain_ratio
        self.check_every = check_every
        self._dictionaries: dict[int, zstandard.ZstdCompressionDict] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._current: int = NO_DICTIONARY
        self._samples: collections.deque[bytes] = collections.deque(maxlen=SAMPLES)
        self._window: collections.deque[tuple[int, int]] = collections.deque(maxlen=window)
        self._baseline: float | None = None  # compressed/raw just after the adoption
        self._since_adopted = 0
        self._training: threading.Thread | None = None
        self._save: SaveDictionary | None = None
        self.trained = 0  # dictionaries this process trained

    # -- dictionaries ----------------------------------------------------------------------

    def load(self, dictionaries: list[tuple[int, bytes]]) -> None:
        """Dictionaries stored in the database; the newest becomes the current one."""
        for dict_id, content in dictionaries:
            self._add(dict_id, content)
        if dictionaries:
            self._adopt(max(dict_id for dict_id, _ in dictionaries))

    def train_with(self, save: SaveDictionary) -> None:
        """Let the codec train dictionaries, ``save`` storing each one."""
        self._save = save

    def _add(self, dict_id: int, content: bytes) -> zstandard.ZstdCompressionDict:
        with self._lock:
            known = self._dictionaries.get(dict_id)
            if known is None:
                known = self._dictionaries[dict_id] = zstandard.ZstdCompressionDict(content)
            return known

    def _adopt(self, dict_id: int) -> None:
        with self._lock:
            self._current = dict_id
            self._window.clear()
            self._baseline = None
            self._since_adopted = 0

    @property
    def current(self) -> int:
        return self._current

    # -- compress and decompress -------------------------------------------------------------

    def _compressor(self, dict_id: int) -> zstandard.ZstdCompressor:
        per_thread: dict[int, zstandard.ZstdCompressor] = self._local.__dict__.setdefault("c", {})
        compressor = per_thread.get(dict_id)
        if compressor is None:
            data = self._dictionaries[dict_id] if dict_id != NO_DICTIONARY else None
            compressor = per_thread[dict_id] = zstandard.ZstdCompressor(level=LEVEL, dict_data=data)
        return compressor

    def _decompressor(self, dict_id: int, fetch: LoadDictionary) -> zstandard.ZstdDecompressor:
        per_thread: dict[int, zstandard.ZstdDecompressor] = self._local.__dict__.setdefault("d", {})
        decompressor = per_thread.get(dict_id)
        if decompressor is None:
            data = None
            if dict_id != NO_DICTIONARY:
                data = self._dictionaries.get(dict_id) or self._add(dict_id, fetch(dict_id))
            decompressor = per_thread[dict_id] = zstandard.ZstdDecompressor(dict_data=data)
        return decompressor

    def compress(self, body: bytes) -> tuple[int | None, bytes]:
        """(dict_id, stored bytes) for a body: RAW when compression is off or does not
        make it smaller."""
        if not self.enabled:
            return RAW, body
        dict_id = self._current
        packed = self._compressor(dict_id).compress(body)
        if len(body) <= SAMPLE_MAX:
            self._observe(body, len(packed), dict_id)
        if len(packed) >= len(body):
            return RAW, body
        return dict_id, packed

    def decompress(self, dict_id: int | None, stored: bytes, fetch: LoadDictionary) -> bytes:
        if dict_id is RAW:
            return bytes(stored)
        return self._decompressor(dict_id, fetch).decompress(stored)

    # -- when to train -----------------------------------------------------------------------

    def _observe(self, body: bytes, packed: int, dict_id: int) -> None:
        self._samples.append(body)
        if self._save is None or dict_id != self._current:
            return
        self._window.append((len(body), packed))
        self._since_adopted += 1
        if self._should_train():
            self._start_training()

    def _should_train(self) -> bool:
        if self._training is not None and self._training.is_alive():
            return False
        if self._current == NO_DICTIONARY:
            return self._since_adopted >= self.train_after
        if len(self._window) < (self._window.maxlen or 0):
            return False
        ratio = sum(p for _, p in self._window) / sum(r for r, _ in self._window)
        if self._baseline is None:
            self._baseline = ratio
            return False
        return self._since_adopted >= self.check_every and ratio > self._baseline * (
            self.retrain_ratio
        )

    def _start_training(self) -> None:
        samples: list[bytes | bytearray | memoryview] = list(self._samples)
        self._training = threading.Thread(
            target=self._train, args=(samples,), name="embrasure-zstd-dictionary", daemon=True
        )
        self._training.start()

    def _train(self, samples: list[bytes | bytearray | memoryview]) -> None:
        save = self._save
        assert save is not None
        try:
            trained = zstandard.train_dictionary(DICT_SIZE, samples, level=LEVEL)
            content = trained.as_bytes()
            dict_id = save(content, len(samples))
        except Exception:  # a dictionary is an optimisation: the log goes on without it
            log.exception("training a zstd dictionary for the log failed")
            with self._lock:
                self._since_adopted = 0  # try again after as many bodies
            return
        self._add(dict_id, content)
        self._adopt(dict_id)
        self.trained += 1
        log.info("log bodies now compressed with zstd dictionary %d", dict_id)

    def wait_for_training(self, timeout: float = 30.0) -> None:
        """Tests and benchmarks: let a running training finish."""
        if self._training is not None:
            self._training.join(timeout)
