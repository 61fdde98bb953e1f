"""The partner process of a projector taking turns (turns.py): ``python -m
embrasure.projector.partner FD``, started by the projector itself, never by hand."""

from __future__ import annotations

import sys

from embrasure.projector import turns, worker

if __name__ == "__main__":
    worker.follow(turns.partner_pipe(sys.argv))
