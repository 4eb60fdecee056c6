"""The schema of ``experience.db``: named, append-only migrations, like memory's (never edit a shipped one)."""

from __future__ import annotations

from cortana.memory.migrations import Migration

__all__ = ["experience_migrations"]


def experience_migrations() -> list[Migration]:
    """The schema of ``experience.db``: recipes, the runs they came from and were used in, ratings; the texts a
    recipe is found by (its task, the prompt it was learned from), whose vectors are in the ``recipe_`` index."""
    return [
        (
            "experience_0001_recipes_runs_ratings",
            """
            CREATE TABLE runs (
                id           INTEGER PRIMARY KEY AUTOINCREMENT,
                resource_id  TEXT NOT NULL,
                thread_id    TEXT NOT NULL,
                prompt       TEXT NOT NULL,
                embedding    BLOB,                 -- the prompt as a query vector, packed float32
                embedder     TEXT,
                tool_calls   INTEGER NOT NULL,
                tool_errors  INTEGER NOT NULL,
                model_calls  INTEGER NOT NULL,
                elapsed      REAL NOT NULL,
                think        TEXT,                 -- the think setting the run used, when a recipe lowered it
                finished_at  REAL NOT NULL
            );
            CREATE INDEX runs_by_thread ON runs (resource_id, thread_id, id);
            CREATE TABLE recipes (
                id            INTEGER PRIMARY KEY AUTOINCREMENT,
                task          TEXT NOT NULL,
                steps         TEXT NOT NULL,       -- JSON list of strings
                avoid         TEXT NOT NULL,       -- JSON list of strings
                files         TEXT NOT NULL,       -- JSON list of fingerprints
                commands      TEXT NOT NULL,       -- JSON list of strings
                embedding     BLOB,                -- the task as a passage vector, packed float32
                embedder      TEXT,
                source_run_id INTEGER REFERENCES runs (id),
                imported_good INTEGER NOT NULL DEFAULT 0,
                imported_bad  INTEGER NOT NULL DEFAULT 0,
                created_at    REAL NOT NULL
            );
            CREATE TABLE recipe_uses (
                run_id     INTEGER NOT NULL REFERENCES runs (id),
                recipe_id  INTEGER NOT NULL REFERENCES recipes (id),
                similarity REAL NOT NULL,
                PRIMARY KEY (run_id, recipe_id)
            );
            CREATE INDEX recipe_uses_by_recipe ON recipe_uses (recipe_id);
            CREATE TABLE ratings (
                id         INTEGER PRIMARY KEY AUTOINCREMENT,
                run_id     INTEGER NOT NULL REFERENCES runs (id),
                value      INTEGER NOT NULL,       -- +1 good, -1 bad
                source     TEXT NOT NULL,          -- 'command', 'correction' or 'api'
                created_at REAL NOT NULL
            );
            CREATE INDEX ratings_by_run ON ratings (run_id);
            """,
        ),
        (
            "experience_0002_recipe_texts",
            """
            CREATE TABLE recipe_texts (
                id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- the key of its vector in the recipe index
                recipe_id  INTEGER NOT NULL REFERENCES recipes (id) ON DELETE CASCADE,
                kind       TEXT NOT NULL,                      -- 'task', or 'prompt': the prompt it was learned from
                text       TEXT NOT NULL
            );
            CREATE INDEX recipe_texts_by_recipe ON recipe_texts (recipe_id);
            INSERT INTO recipe_texts (recipe_id, kind, text) SELECT id, 'task', task FROM recipes ORDER BY id;
            INSERT INTO recipe_texts (recipe_id, kind, text)
                SELECT r.id, 'prompt', u.prompt FROM recipes r JOIN runs u ON u.id = r.source_run_id ORDER BY r.id;
            """,
        ),
    ]
