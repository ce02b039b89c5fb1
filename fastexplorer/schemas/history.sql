-- fastexplorer/history, version 1: the epoch history `history.sqlite` of a run folder, an index of its epoch files.
-- Written by `fastexplorer.history.add_epoch` as each epoch file is written (WAL mode, one transaction per epoch);
-- read with any SQLite client. The epoch files stay the run's record: `build_history` writes this index again from them.
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
-- summary: the epoch document without `tree`, `heatmaps` and `alerts`, with `n_alerts` and `custom` (JSON)
CREATE TABLE IF NOT EXISTS epochs(epoch INTEGER PRIMARY KEY, file TEXT NOT NULL, summary TEXT NOT NULL);
-- stats: a node's `xtra.stats` in the epoch file (JSON); clustered on (epoch, path): an epoch is appended at the end
CREATE TABLE IF NOT EXISTS stats(epoch INTEGER NOT NULL, path TEXT NOT NULL, stats TEXT NOT NULL, PRIMARY KEY(epoch, path)) WITHOUT ROWID;
-- Added within version 1 (a history without them is read from the epoch files; a writer adds them): `Run.df` column-wise.
-- layouts: the rows `Run.df` makes of an epoch (`epoch_scalars`), as JSON `{"root", "layer", "class", "kind", "stat"}`:
-- the root's label (`root_label`) and one list per column; kept once, under `key`, the SHA-1 of its text
CREATE TABLE IF NOT EXISTS layouts(key TEXT PRIMARY KEY, layout TEXT NOT NULL);
-- scalars: an epoch's values in its layout's order, float64 little-endian, NaN for null; `layout`: a `layouts` key
CREATE TABLE IF NOT EXISTS scalars(epoch INTEGER PRIMARY KEY, layout TEXT NOT NULL, scalars BLOB NOT NULL);
-- An epoch written again, or forgotten, by any writer (one that knows no `scalars` too) loses its scalars with it
CREATE TRIGGER IF NOT EXISTS scalars_rewritten AFTER INSERT ON epochs BEGIN DELETE FROM scalars WHERE epoch = NEW.epoch; END;
CREATE TRIGGER IF NOT EXISTS scalars_forgotten AFTER DELETE ON epochs BEGIN DELETE FROM scalars WHERE epoch = OLD.epoch; END;
