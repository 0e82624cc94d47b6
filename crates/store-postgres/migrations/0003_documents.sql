-- Migration 3: documents, small named values a broker keeps whole and replaces whole (its
-- ACLs, its SCRAM credentials changed at run time), as it keeps files of a data directory.
-- Applied in one transaction under the migrations' advisory lock; never edited once
-- released (add a new file instead).

CREATE TABLE documents (
    name       text COLLATE "C" PRIMARY KEY CHECK (name <> ''),
    body       bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
