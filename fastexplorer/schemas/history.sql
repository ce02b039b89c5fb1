-- fastexplorer/history, version 1: the epoch history `history.sqlite` of a run folder, an index of its epoch files.
-- Written by `fastexplorer.history.add_epoch` as each epoch file is written (WAL mode, one transaction per epoch);
-- read with any SQLite client. The epoch files stay the run's record: `build_history` writes this index again from them.
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
-- summary: the epoch document without `tree`, `heatmaps` and `alerts`, with `n_alerts` and `custom` (JSON)
CREATE TABLE IF NOT EXISTS epochs(epoch INTEGER PRIMARY KEY, file TEXT NOT NULL, summary TEXT NOT NULL);
-- stats: a node's `xtra.stats` in the epoch file (JSON); clustered on (epoch, path): an epoch is appended at the end
CREATE TABLE IF NOT EXISTS stats(epoch INTEGER NOT NULL, path TEXT NOT NULL, stats TEXT NOT NULL, PRIMARY KEY(epoch, path)) WITHOUT ROWID;
