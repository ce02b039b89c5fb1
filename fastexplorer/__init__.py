"""See inside a fastai model while it trains: a representation tree, per-layer statistics and a web explorer

Modules:

- `fastexplorer.console`: What the tool finds, told where a fastai user reads while training: under the progress table, before the first batch and after each epoch, as HTML in a notebook and as plain lines in a terminal or a log.
- `fastexplorer.dependence`: Karpathy's check, "use backprop to chart dependencies", run on the first batch: a sample's output must not depend on other samples' inputs, and a next-token model's output at a position must not depend on later positions."""

__version__ = "0.0.1"

# Nothing is imported here: the explorer and the report (`fastexplorer serve`, `report`, `--help`) read run folders
# without torch or fastai, so importing any `fastexplorer` module must not load the training stack. `fastexplorer.all`
# and the demo import fastai quietly (`quiet_fastai`) before the training modules do.

def quiet_fastai():
    """Import fastai's core without its `torch.jit.script` FutureWarning (torch 2.10 and later deprecate the calls
    fastai 2.8 makes on import: its code, not the user's)"""
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', r'`torch\.jit\.script` is deprecated', FutureWarning)
        import fastai.torch_basics  # noqa: F401
