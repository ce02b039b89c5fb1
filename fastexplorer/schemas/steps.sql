-- fastexplorer/steps, version 3: the step database `steps.sqlite` of a run folder.
-- Written by `fastexplorer.stepdb.StepWriter` (WAL mode, one transaction per flush); read with any SQLite client, and
-- `fastexplorer.chunks` for the statistics, which `act` and `grad` keep packed: a row per *chunk*, `chunks.CHUNK_ROWS`
-- consecutive rows of one layer (or parameter) and split (a series' last rows, fewer: those of one flush each), as
-- zlib-compressed, byte-shuffled arrays. The statistics are declared by the modules that compute them, and listed in
-- `meta` as `stats` (JSON), in the order of a chunk's columns. Chunk tables are clustered on (name, split, step,
-- batch) of their first row: one layer's series is one contiguous range of the file. Pages of 16 KiB hold a chunk
-- without overflow pages.
PRAGMA page_size = 16384;
-- A batch's `step` is the number of training steps taken before it in the run; every validation batch of an epoch has
-- the step at which validation ran. `batch` is `batches.id`, in the order batches were written (steps never decrease).
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS names(id INTEGER PRIMARY KEY, path TEXT NOT NULL, kind TEXT NOT NULL CHECK(kind IN ('layer', 'param')), UNIQUE(path, kind));
CREATE TABLE IF NOT EXISTS batches(id INTEGER PRIMARY KEY, step INTEGER NOT NULL, fit INTEGER, epoch INTEGER, split TEXT NOT NULL,
    iter INTEGER, loss REAL, smooth_loss REAL, time REAL);
CREATE INDEX IF NOT EXISTS batches_split_step ON batches(split, step);
CREATE TABLE IF NOT EXISTS epochs(fit INTEGER NOT NULL, epoch INTEGER NOT NULL, step INTEGER NOT NULL, PRIMARY KEY(fit, epoch)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hypers(grp INTEGER NOT NULL, name TEXT NOT NULL, split TEXT NOT NULL, step INTEGER NOT NULL, batch INTEGER NOT NULL,
    value REAL, PRIMARY KEY(grp, name, split, step, batch)) WITHOUT ROWID;
-- `hist_ranges`: the low and high end of the bins of each layer whose range was fitted to it (`hist_lo` = `fit` in `meta`).
CREATE TABLE IF NOT EXISTS hist_ranges(name INTEGER PRIMARY KEY, lo REAL NOT NULL, hi REAL NOT NULL);
-- `step`, `batch`: the chunk's first row's; `last_step`, `last_batch`: its last row's; `n`: its rows. `rows`: the rows'
-- batch ids and steps (`chunks.pack_rows`); `stats`: the statistics (`chunks.pack_stats`: counts float64, the others
-- float32); `hist`: the activation histograms (`chunks.pack_hist`, `hist_bins` + 2 int32 counts a row: below `hist_lo`,
-- the bins, from `hist_hi` up).
CREATE TABLE IF NOT EXISTS act(name INTEGER NOT NULL, split TEXT NOT NULL, step INTEGER NOT NULL, batch INTEGER NOT NULL,
    last_step INTEGER NOT NULL, last_batch INTEGER NOT NULL, n INTEGER NOT NULL, rows BLOB NOT NULL, stats BLOB NOT NULL,
    hist BLOB NOT NULL, PRIMARY KEY(name, split, step, batch)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS grad(name INTEGER NOT NULL, split TEXT NOT NULL, step INTEGER NOT NULL, batch INTEGER NOT NULL,
    last_step INTEGER NOT NULL, last_batch INTEGER NOT NULL, n INTEGER NOT NULL, rows BLOB NOT NULL, stats BLOB NOT NULL,
    PRIMARY KEY(name, split, step, batch)) WITHOUT ROWID;
