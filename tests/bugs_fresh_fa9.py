"""Bug zoo, a fresh family from fastai's own GitHub issues (issue 62, fa9): reports of a fastai run gone wrong where a
maintainer's answer or the thread's own fix named the bug. See `bugzoo.py`. Each case cites its thread; its truth
(`kinds`, `layer`) was written and committed before the case was ever run under the tool. Cases were chosen for how
common the bug is in a tabular or image pipeline (a model trained on unnormalised inputs and then fed normalised ones, a
constant column divided by its zero spread), never for whether the tool catches it. Each bug was checked with plain
fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains. The normalisation
mismatch leaves every statistic of training healthy (training is a healthy run on raw pixels; only the held-out inputs
differ): its docstring says so.

Sources were scarce: the stored copies of forums.fast.ai threads the search found were mostly lesson wikis or questions
without their answers, and most fastai issues found were crashes, library bugs fixed in the library, or threads already
cited elsewhere in the zoo (fastai 1486, 1863). Threads outside the theme (other projects' issue trackers) were left
out, so the family holds two cases rather than five."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _small_cnn


# ---- preprocessing: normalised at one end of the pipeline only ----
@case("https://github.com/fastai/fastai/issues/1388",
      "the model is trained on unnormalised pixels, then the same images are normalised (by the training set's "
      "statistics) before they reach it for validation: the inputs it is scored on are shifted against what it learnt",
      {'valid_input_shift'}, epochs=6, lr=1e-2)
def normalised_only_when_reloaded(fixed):
    """'Accuracy reduces on reloading model after closing and relaunching the vm/instance': the poster trained an image
    classifier, saved it, and in a new session rebuilt the data and loaded the weights; 'the metrics drop'. The
    maintainer's answer: 'Be careful, you forgot to normalize in your section 1 ... Since you normalize your data in
    section 2, the results are of course very different. When I add normalization in section 1 (or remove it in
    section 2), the bug disappears.' Ported to scikit-learn's 8x8 digits as one-channel images with pixels from 0 to 1
    (as `ToTensor` gives), a small CNN (two 3x3 convolutions, global pooling, a linear head), Adam at 3e-3, 4 epochs:
    the bug trains on the raw pixels and validates on the same kind of images normalised by the training set's mean and
    spread (the second session's pipeline); the twin normalises both, as the answer says. No statistic of training can
    see it: the training batches are a healthy run's; only the validation inputs reach the model shifted (mean 0 and
    spread 1 against the training inputs' 0.31 and 0.38). Measured over 6 epochs (1,437 training images, 360 held out):
    the training loss falls as a healthy run's (batch losses to 0.28 of their first at seed 0, 0.43 at seed 1) while the
    validation loss climbs, 2.58 to 5.76 (seed 1: 2.33 to 15.9), and validation accuracy stays at 0.31 (seed 1: 0.16);
    the twin's validation loss falls to 0.64 (0.60), its accuracy reaches 0.82 (0.80), its batch losses 0.28 (0.22)."""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y)
    m, s = xt.mean(), xt.std()
    xv = (xv - m) / s                                         # the second session normalises
    if fixed: xt = (xt - m) / s                               # the fix: normalise when training as well
    return Learner(_dls(xt, yt, xv, yv, bs=32), _small_cnn(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- preprocessing: a constant column standardised by its zero spread ----
def _cancer_with_constant(level=20.0):
    "scikit-learn's breast-cancer features with one more column that holds the same reading in every row (a set point)"
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    x = torch.tensor(d.data, dtype=torch.float32)
    x = torch.cat([x, torch.full((len(x), 1), level)], 1)
    return x, torch.tensor(d.target, dtype=torch.long)

@case("https://github.com/fastai/fastai/issues/889",
      "a continuous column that is constant in the data is standardised by its own standard deviation, 0: "
      "(x - mean) / 0 puts NaN in that column of every row, and the loss is NaN from the first batch",
      {'nonfinite_input'}, epochs=4, lr=1e-3)
def constant_column_divided_by_zero_std(fixed):
    """'Normalization for tabulardata produces nan for constant columns': 'the normalization will fail if some columns
    have constant values', because the tabular `Normalize` divided by each column's standard deviation; the reporter's
    example is 'a temperature measurement, which could be 20.0 in a controlled environment'. The fix the thread
    proposed (and fastai's normaliser later took, with a small epsilon): 'It will only perform the division for nonzero
    standard deviations'. Ported to scikit-learn's breast-cancer features (30 columns) with one more column held at
    20.0 in every row, standardised column by column with the training rows' mean and standard deviation as the old
    `Normalize` did, an MLP (31-64-64-2), cross-entropy, Adam at 1e-3, 4 epochs; the twin divides only the columns
    whose spread is not zero (the constant column becomes 0). Measured at seeds 0 and 1: every training and validation
    loss is NaN from the first batch, and validation accuracy sits at 0.37 (the share of the class an all-NaN output's
    argmax names); the twin's batch losses fall to 0.20 (seed 1: 0.23) of their first, its validation accuracy reaches
    0.95 (0.93)."""
    x, y = _cancer_with_constant()
    xt, yt, xv, yv = _split(x, y, n_valid=114)
    m, s = xt.mean(0), xt.std(0)
    if fixed: s = torch.where(s == 0, torch.ones_like(s), s)   # divide only where the spread is not zero
    xt, xv = (xt - m) / s, (xv - m) / s                        # 0 / 0 = NaN in the constant column (the bug)
    model = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
