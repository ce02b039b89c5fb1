"""The cost of writing one epoch as a run grows: `RunWriter.write_epoch` over `--epochs` epochs, with the manifest as
it is now (`run.json` of one size, the epochs listed in `epochs.jsonl`) and, side by side in the same run, as version 1
kept it (the list of epochs inside `run.json`, rewritten whole at every epoch).

Usage: python bench/runfolder.py [--epochs 1000]

Prints the median time of one epoch's write over the first and the last 50 epochs, for each. The epoch document is a
small one (a tiny MLP's), so what grows is the manifest's part.
"""
import argparse, statistics, tempfile, time
from pathlib import Path
from fastexplorer.export import RunWriter
from fastexplorer.core import save_json

class _V1Writer(RunWriter):
    "`write_epoch` as version 1 did it: the manifest lists every epoch and is rewritten whole"
    def write_epoch(self, doc):
        fname = self.path/f"epoch_{doc['epoch']:04d}.json"
        save_json(doc, fname)
        eps = [e for e in self.manifest.setdefault('epochs', []) if e['epoch'] != doc['epoch']]
        eps.append({'epoch': doc['epoch'], 'file': fname.name, 'partial': doc.get('partial', False)})
        self.write_manifest(epochs=eps)
        return fname

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--epochs', type=int, default=1000)
    a = p.parse_args()
    doc = {'schema': 'fastexplorer/epoch', 'version': 1, 'partial': False, 'recorder': {'train_loss': 0.1},
           'tree': {'name': 'MLP', 'nodes': [{'name': str(i), 'xtra': {'stats': {'act': {'mean': 0.1 * i, 'std': 1.}}}} for i in range(6)]}}
    with tempfile.TemporaryDirectory() as d:
        res = {}
        for name,cls in [('now (epochs.jsonl)', RunWriter), ('version 1 (epochs in run.json)', _V1Writer)]:
            w,ts = cls(Path(d)/name.split()[0]).open('MLP'),[]
            for n in range(1, a.epochs + 1):
                t = time.perf_counter(); w.write_epoch({**doc, 'epoch': n}); ts.append(time.perf_counter() - t)
            res[name] = ts
    k = min(50, a.epochs // 2)
    print(f"one epoch's write, {a.epochs} epochs (median of the first / last {k} epochs):")
    for name,ts in res.items():
        print(f"  {name:32s} {statistics.median(ts[:k]) * 1e3:6.2f} ms -> {statistics.median(ts[-k:]) * 1e3:6.2f} ms")

if __name__ == '__main__': main()
