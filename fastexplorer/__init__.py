__version__ = "0.0.1"

import warnings as _warnings
with _warnings.catch_warnings():
    # fastai 2.8 scripts a few functions with `torch.jit.script` when it is imported, which torch 2.10 and later deprecate
    # with a FutureWarning: it concerns fastai's code, not the user's, so it is not shown when fastexplorer imports fastai
    _warnings.filterwarnings('ignore', r'`torch\.jit\.script` is deprecated', FutureWarning)
    import fastai.torch_basics  # noqa: F401,E402
