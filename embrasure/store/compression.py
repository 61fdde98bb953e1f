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

Dictionaries: the first is trained once ``train_after`` (200) small bodies have been
appended, so that a small log benefits too, and the bodies stored before it are
compressed again with it (``recompress``, on a thread of its own; an append that
compressed its bodies before the dictionary came and committed after asks for another
such pass: ``appended``); a dictionary trained on fewer than SAMPLES
bodies is trained again once SAMPLES more have come (more samples, a better one: 2.9%
against 3.4% on the bench events); and a new one when the traffic changes — when the
bodies compressed with the newest dictionary come out ``retrain_ratio`` times larger,
relative to their size, than they did just after it was adopted. Its size follows the
samples (a sixteenth of their bytes, 4 to 64 KiB): a 64 KiB dictionary would be 5% of
a log of 900 events. Training runs on a thread of its own (~0.1 s for 2,000 samples),
so no delivery waits for it. Dictionaries are never deleted: old bodies name theirs.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

import zstandard

log = logging.getLogger("embrasure.log")

LEVEL = 3  # zstd's default, for bodies without a dictionary (batches: ~300 MB/s a core)
# Small bodies with a dictionary: level 6 stores the shared corpus 8% smaller than level 3
# for ~11 µs a body instead of 3 (on the group-commit thread, the GIL released).
DICT_LEVEL = 6
DICT_SIZE = 64 * 1024  # the most; less for fewer samples (dictionary_size)
MIN_DICT_SIZE = 4 * 1024
SAMPLE_MAX = 128 * 1024  # bodies up to this size train dictionaries (batches need none)
SAMPLES = 2000  # the most recent small bodies a dictionary is trained from
WINDOW = 1000  # small bodies a ratio is measured over

RAW = None  # dict_id of a body stored as received (compression off, or it did not pay)
NO_DICTIONARY = 0  # dict_id of a body compressed without a dictionary

# Saves a trained dictionary (its bytes, how many samples) and returns its id.
SaveDictionary = Callable[[bytes, int], int]
# Loads a dictionary another process trained, by id.
LoadDictionary = Callable[[int], bytes]
# Compresses again, with the current dictionary, the bodies stored without one.
Recompress = Callable[[], None]


def dictionary_size(samples: list[bytes | bytearray | memoryview]) -> int:
    return max(MIN_DICT_SIZE, min(DICT_SIZE, sum(len(s) for s in samples) // 16))


class BodyCodec:
    def __init__(
        self,
        enabled: bool = True,
        *,
        train_after: int = 200,
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
        self._window_sums = [0, 0]  # raw and compressed bytes in the window, kept running
        self._baseline: float | None = None  # compressed/raw just after the adoption
        self._since_adopted = 0
        self._training: threading.Thread | None = None
        self._save: SaveDictionary | None = None
        self._recompress: Recompress | None = None
        self._recompressing: threading.Thread | None = None
        self._recompress_again = False
        self._trained_on = SAMPLES  # samples behind the current dictionary (loaded: enough)
        self.trained = 0  # dictionaries this process trained

    # -- dictionaries ----------------------------------------------------------------------

    def load(self, dictionaries: list[tuple[int, bytes]]) -> None:
        """Dictionaries stored in the database; the newest becomes the current one."""
        for dict_id, content in dictionaries:
            self._add(dict_id, content)
        if dictionaries:
            self._adopt(max(dict_id for dict_id, _ in dictionaries))

    def train_with(self, save: SaveDictionary, recompress: Recompress | None = None) -> None:
        """Let the codec train dictionaries, ``save`` storing each one; after the first,
        ``recompress`` compresses again the bodies stored without a dictionary."""
        self._save = save
        self._recompress = recompress

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
            self._window_sums = [0, 0]
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
            if dict_id == NO_DICTIONARY:
                compressor = zstandard.ZstdCompressor(level=LEVEL)
            else:
                # The row names its dictionary: the frame need not (4 bytes a body).
                compressor = zstandard.ZstdCompressor(
                    level=DICT_LEVEL, dict_data=self._dictionaries[dict_id], write_dict_id=False
                )
            per_thread[dict_id] = compressor
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
        # Running sums, not a sum over the window per body: this runs on the appending
        # thread for every delivery (summing 1,000 pairs per body cost a fifth of the
        # single-event ingest rate, bench/results/storage.md).
        window, sums = self._window, self._window_sums
        if len(window) == window.maxlen:
            raw, old = window[0]
            sums[0] -= raw
            sums[1] -= old
        window.append((len(body), packed))
        sums[0] += len(body)
        sums[1] += packed
        self._since_adopted += 1
        if self._should_train():
            self._start_training()

    def _should_train(self) -> bool:
        if self._training is not None and self._training.is_alive():
            return False
        if self._current == NO_DICTIONARY:
            return self._since_adopted >= self.train_after
        if self._trained_on < SAMPLES and self._since_adopted >= SAMPLES:
            return True  # more samples since: a better dictionary
        if len(self._window) < (self._window.maxlen or 0):
            return False
        ratio = self._window_sums[1] / max(1, self._window_sums[0])
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
        first = self._current == NO_DICTIONARY
        try:
            trained = zstandard.train_dictionary(
                dictionary_size(samples), samples, level=DICT_LEVEL
            )
            content = trained.as_bytes()
            dict_id = save(content, len(samples))
        except Exception:  # a dictionary is an optimisation: the log goes on without it
            log.exception("training a zstd dictionary for the log failed")
            with self._lock:
                self._since_adopted = 0  # try again after as many bodies
            return
        self._add(dict_id, content)
        self._adopt(dict_id)
        self._trained_on = len(samples)
        self.trained += 1
        log.info("log bodies now compressed with zstd dictionary %d", dict_id)
        if first:
            self._start_recompress()

    # -- the bodies stored before the first dictionary -------------------------------------

    def appended(self, packed: list[tuple[int | None, bytes]]) -> None:
        """After an append commits: bodies it compressed without a dictionary, once one
        exists, were compressed while it was being trained; compress them again."""
        if self._current != NO_DICTIONARY and any(d == NO_DICTIONARY for d, _ in packed):
            self._start_recompress()

    def _start_recompress(self) -> None:
        if self._recompress is None:
            return
        with self._lock:
            if self._recompressing is not None and self._recompressing.is_alive():
                self._recompress_again = True  # it may have passed them already
                return
            self._recompressing = threading.Thread(
                target=self._run_recompress, name="embrasure-zstd-recompress", daemon=True
            )
            self._recompressing.start()

    def _run_recompress(self) -> None:
        assert self._recompress is not None
        while True:
            try:
                self._recompress()
            except Exception:  # they stay readable as they are
                log.exception("compressing bodies again with the dictionary failed")
            with self._lock:
                if not self._recompress_again:
                    return
                self._recompress_again = False

    def wait_for_training(self, timeout: float = 30.0) -> None:
        """Tests and benchmarks: let a running training, and the compression again of
        the bodies before the first dictionary, finish."""
        if self._training is not None:
            self._training.join(timeout)
        if self._recompressing is not None:  # started by the training, when it ends
            self._recompressing.join(timeout)
