"""Lists and notes ("add milk to my shopping list") kept in SQLite in the user's data folder, so they
survive a restart. The folder: `$HEADSTART_DATA_DIR` when set, else platformdirs' user data dir for
"headstart"; one file, rows per user and list."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

DATA_DIR_ENV = "HEADSTART_DATA_DIR"


def data_dir() -> Path:
    """Where headstart keeps the user's data: `$HEADSTART_DATA_DIR`, else the platform's user data dir."""
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured)
    import platformdirs

    return Path(platformdirs.user_data_dir("headstart", appauthor=False))


def canonical_list(name: str) -> str:
    """A list's name as stored: lower case, without "list", "my", "the" ("My Shopping List" -> "shopping";
    "to do" and "todo" are one list)."""
    words = [w for w in name.lower().replace("-", " ").split() if w not in ("list", "my", "the")]
    text = " ".join(words) or "shopping"
    return {"to do": "todo", "grocery": "shopping", "groceries": "shopping"}.get(text, text)


class ListStore:
    """The lists of every user in one SQLite file (created on first use).

    Args:
        path: the SQLite file (default: `data_dir() / "lists.sqlite3"`).
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else data_dir() / "lists.sqlite3"
        self._lock = threading.Lock()
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path)
        if not self._ready:
            db.execute("CREATE TABLE IF NOT EXISTS items (user TEXT NOT NULL, list TEXT NOT NULL, "
                       "item TEXT NOT NULL, added_at REAL NOT NULL DEFAULT (julianday('now')))")
            db.commit()
            self._ready = True
        return db

    def add(self, user: str, list_name: str, item: str) -> None:
        """Add `item` to the user's list (a list is made by its first item)."""
        with self._lock, self._connect() as db:
            db.execute("INSERT INTO items (user, list, item) VALUES (?, ?, ?)",
                       (user, canonical_list(list_name), item.strip()))
        db.close()

    def items(self, user: str, list_name: str) -> list[str]:
        """The user's list, oldest item first ([] for a list never made)."""
        with self._lock:
            db = self._connect()
            try:
                rows = db.execute("SELECT item FROM items WHERE user = ? AND list = ? ORDER BY rowid",
                                  (user, canonical_list(list_name))).fetchall()
            finally:
                db.close()
        return [row[0] for row in rows]

    def remove(self, user: str, list_name: str, item: str) -> bool:
        """Remove `item` (case-insensitive) from the list; False when it was not on it."""
        with self._lock, self._connect() as db:
            cursor = db.execute("DELETE FROM items WHERE user = ? AND list = ? AND lower(item) = lower(?)",
                                (user, canonical_list(list_name), item.strip()))
        db.close()
        return cursor.rowcount > 0
