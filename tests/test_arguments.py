"Bad arguments are refused up front, with the argument's name and what it may be, before anything is written (issue 17)"
import re
import pytest
from fastai.callback.progress import *   # noqa: F403
from fastexplorer.all import *

BAD = [  # (arguments, the name the error must give, the exception)
    (dict(every='5'), '`every`', TypeError), (dict(every=2.5), '`every`', TypeError), (dict(every=0), '`every`', ValueError),
    (dict(alerts={'dead': -1}), "`alerts['dead']`", ValueError), (dict(alerts={'typo': 1}), '`alerts`', ValueError),
    (dict(alerts={'grad_ratio': 0.5}), "`alerts['grad_ratio']`", ValueError), (dict(alerts=[0.5]), '`alerts`', ValueError),
    (dict(hist_bins=0), '`hist_bins`', ValueError), (dict(hist_range=(10, -10)), '`hist_range`', ValueError),
    (dict(hist_range=(0, float('inf'))), '`hist_range`', ValueError), (dict(sample=0), '`sample`', ValueError),
    (dict(layers=[]), '`layers`', ValueError), (dict(path=''), '`path`', ValueError), (dict(path=None), '`path`', TypeError),
    (dict(path='r' * 300), '`path`', ValueError), (dict(valid='yes'), '`valid`', TypeError), (dict(port=70000), '`port`', ValueError),
    (dict(near_zero=-1), '`near_zero`', ValueError), (dict(heatmaps=-1), '`heatmaps`', ValueError),
]

@pytest.mark.parametrize('kw,name,exc', BAD, ids=[str(b[0]) for b in BAD])
def test_bad_argument_is_named(kw, name, exc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = {'path': tmp_path/'run', **kw}
    with pytest.raises(exc, match=f"ExplorerCallback: {re.escape(name)} must be"): ExplorerCallback(**args)
    assert list(tmp_path.iterdir()) == []                      # nothing written

def test_good_arguments_pass(tmp_path):
    import numpy as np
    cb = ExplorerCallback(tmp_path/'run', every=np.int64(3), hist_range=[-5, 5.5], near_zero=0, alerts={'dead': 1, 'grad_ratio': 100},
                          heatmaps=0, port=0, layers=['0.*'])
    assert cb.every == 3 and not (tmp_path/'run').exists()

def test_layers_selecting_nothing_refused_before_the_folder(tmp_path):
    learn = digits_learner(cbs=ExplorerCallback(tmp_path/'run', layers='no.such.layer'))
    with pytest.raises(ValueError, match="`layers` selects no module"):
        with learn.no_bar(), learn.no_logging(): learn.fit(1)
    assert not (tmp_path/'run').exists()
