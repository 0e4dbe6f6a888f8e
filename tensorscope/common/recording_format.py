"""The recording format shared by its writer and its reader (docs/session-format.md).

A ``.tscope`` file is one SQLite database: ``Recorder``
(``tensorscope.training.recording``) writes it, ``SessionReader``
(``tensorscope.viewer.reader``) reads it.
"""
from __future__ import annotations

import os
import urllib.parse

FORMAT = "tensorscope-session"
FORMAT_VERSION = 2
#: versions this reader opens: 1 had no ``rank`` columns (every row is rank 0)
READABLE_VERSIONS = ("1", "2")
SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, step INTEGER NOT NULL, seq INTEGER NOT NULL,
    type TEXT NOT NULL, body BLOB NOT NULL, rank INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS messages_step ON messages (step);
CREATE TABLE IF NOT EXISTS steps (
    rank INTEGER NOT NULL DEFAULT 0, step INTEGER, kind TEXT, loss REAL, duration REAL,
    calls INTEGER, grad_norm REAL, dropped INTEGER, memory INTEGER, time REAL,
    PRIMARY KEY (rank, step));
CREATE TABLE IF NOT EXISTS findings (
    id INTEGER PRIMARY KEY, rank INTEGER NOT NULL DEFAULT 0, step INTEGER, kind TEXT,
    severity TEXT, phase TEXT, root INTEGER, module TEXT, message TEXT, count INTEGER);
CREATE TABLE IF NOT EXISTS calls (
    rank INTEGER NOT NULL DEFAULT 0, step INTEGER, call INTEGER, root INTEGER, path TEXT,
    type TEXT, finite INTEGER, grad_norm REAL, mean REAL, std REAL, min REAL, max REAL,
    PRIMARY KEY (rank, step, call));
"""


class RecordingError(OSError):
    """A recording cannot be written or read (the message says why).

    An ``OSError``, so that callers handling file errors handle it too.
    """


def read_only_uri(path: str) -> str:
    """A read-only SQLite URI for ``path`` (quoted: names may hold ``?`` or ``#``)."""
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
