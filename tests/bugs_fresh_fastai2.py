"""Bug zoo, a second family from fastai's own users (issue 45): GitHub issues of fastai/fastai and fastai/fastai2 and
threads of forums.fast.ai that no other family cites. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`,
`layer`) was written and committed before the case was ever run under the tool. Cases were chosen for how common the bug
is among fastai users (torch's own `nn.MSELoss` given `(n, 1)` outputs and `(n,)` targets, which broadcast to a square
loss; segmentation masks read from png as 0 and 255 handed to a two-class cross-entropy; a binary cross-entropy swapped
in for the default loss while the labels stay class indices; a target class that only the validation rows hold), never
for whether the tool catches it. Three of them stop with an error at their first batch or first validation: what a tool
says before the crash is what counts. Kinds assumed as a correct tool would name them: `target_shape`, `target_classes`
(as in `bugs_data`), `valid_classes_unseen`. Each bug was checked with plain fastai (no fastexplorer callback) before
any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.losses import MSELossFlat, CrossEntropyLossFlat, BCEWithLogitsLossFlat
from fastai.metrics import accuracy, accuracy_multi
from bugzoo import *
from bugs_fresh import _gen


# ---- targets: shapes ----
def _diabetes():
    "scikit-learn's diabetes regression, features and target standardised; the target as `(n,)`, as a loader gives it"
    from sklearn.datasets import load_diabetes
    d = load_diabetes()
    x, y = torch.tensor(d.data, dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()

@case("https://github.com/fastai/fastai/issues/1863",
      "torch's `nn.MSELoss` as the Learner's loss: the model's `(n, 1)` outputs and the loader's `(n,)` targets broadcast to an `(n, n)` loss",
      {'target_shape'}, epochs=8, lr=1e-3)
def mse_loss_unflattened_targets(fixed):
    """'error using nn.MSELoss() with basic_train.py': '`model(xb)` has shape (N,1) while `yb` has shape (N,). In this
    case, the DataLoader is returning the shapes that cause this function not to work with nn.MSELoss() due to
    broadcasting'; the reporter proposed flattening before the loss, which is what fastai's `MSELossFlat` (the loss its
    regression factories pick) does. Each output is pulled towards every target of its batch, so the model can only
    learn the batch mean. The diabetes features and target standardised, an MLP (10-64-64-1), Adam at 1e-3, 8 epochs of
    11 batches; the twin passes `MSELossFlat()`. Measured: the batch loss stays near 1, the variance of the standardised
    target (loss ratio 0.98; validation 1.03 after 8 epochs); the twin's ratio 0.50, validation 0.55"""
    x, y = _diabetes()
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=MSELossFlat() if fixed else nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))

def _digits_unit():
    x, y = digits_raw()
    return x / 16, y

@case("https://forums.fast.ai/t/how-to-convert-multi-class-to-multi-label-classification/73963",
      "`BCEWithLogitsLossFlat` swapped in for the default loss while the labels stay class indices: `Target size ([64]) must be the same as input size ([640])`",
      {'target_shape'}, epochs=5, lr=3e-3)
def bce_on_class_index_labels(fixed):
    """'How to convert multi-class to multi-label classification?': on MNIST with ten classes the user set
    `learn.loss_func=BCEWithLogitsFlat()` on a single-label DataBunch and got 'ValueError: Target size
    (torch.Size([64])) must be the same as input size (torch.Size([640]))': the flattened loss gets 64 class indices
    against 640 logits. The user's own fix, reported in the thread: label the data as multi-label ('I was able to force
    the Databunch label as MultiCategoryList by label_cls=MultiCategoryList, and the resultant training reflects as
    multi-label classification'), i.e. one-hot targets of ten columns. The digits scaled to 0..1, an MLP (64-128-10),
    Adam at 3e-3; the twin one-hot encodes the labels (what `MultiCategoryBlock` gives) and reads `accuracy_multi`.
    Measured: the bug stops at its first batch with the thread's `ValueError: Target size (torch.Size([64])) must be the
    same as input size (torch.Size([640]))`; the twin's loss ratio 0.20 (accuracy_multi 0.97 after 5 epochs)"""
    x, y = _digits_unit()
    t = F.one_hot(y, 10).float() if fixed else y
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls(x, t, bs=64), model, loss_func=BCEWithLogitsLossFlat(),
                   metrics=accuracy_multi if fixed else accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- targets: values ----
def _blobs(n=256, size=16, seed=0):
    "Images of noise with one bright disc each; masks 1 on the disc, 0 elsewhere, as `(n, size, size)` long"
    g = _gen(seed)
    x, m = 0.3 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, size, size, dtype=torch.long)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing='ij')
    for i in range(n):
        r = float(torch.randint(2, 5, (1,), generator=g))
        cy, cx = torch.randint(4, size - 4, (2,), generator=g).tolist()
        disc = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        x[i, 0][disc] += 1.
        m[i][disc] = 1
    return x, m

def _seg_net():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 2, 1))

def _pixel_accuracy(out, m): return (out.argmax(1) == m).float().mean()

@case("https://forums.fast.ai/t/segmentation-in-v1/25976/57",
      "binary masks read from png as 0 and 255 go to a two-class pixel cross-entropy: the target 255 is out of bounds",
      {'target_classes'}, epochs=4, lr=1e-3)
def seg_mask_255_two_classes(fixed):
    """'Segmentation in v1': a binary segmentation whose masks hold 0 and 255 failed under the two-class cross-entropy
    (the thread's CUDA error, a device-side assert, is an index out of range on the CPU); the poster's fix: 'I fixed the
    issue by passing div=True and 2 classes in the SegmentationDataset', which divides the mask by 255 so that its
    values are the class indices 0 and 1. 16×16 images of noise with one bright disc, a three-layer fully convolutional
    net with two output channels, fastai's `CrossEntropyLossFlat(axis=1)`, Adam at 1e-3; the twin divides the mask by
    255. Measured: the bug stops at its first batch with `IndexError: Target 255 is out of bounds.`; the twin's loss
    ratio 0.50 (pixel accuracy 0.98 after 4 epochs)"""
    x, m = _blobs()
    m = m * 255                        # as read from the png
    if fixed: m = m // 255             # `div=True`: the class indices 0 and 1
    return Learner(tensor_dls(x, m, bs=16), _seg_net(), loss_func=CrossEntropyLossFlat(axis=1),
                   metrics=_pixel_accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- tabular: a class seen only in validation ----
def _late_class_frame(n=600, n_valid=120, n_late=40, seed=0):
    """Four continuous features, three classes set by the first two; the last `n_late` rows (all in the validation part,
    which is the end of the frame, as with a split by time) carry a fourth class `z` that training never sees"""
    import pandas as pd
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype('float32')
    df = pd.DataFrame(x, columns=['x0', 'x1', 'x2', 'x3'])
    df['y'] = np.array(['a', 'b', 'c'])[(x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)]
    df.loc[n - n_late:, 'y'] = 'z'
    return df, list(range(n - n_valid)), list(range(n - n_valid, n))

@case("https://github.com/fastai/fastai2/issues/534",
      "the validation rows hold a target class the training rows never have: `Categorize` leaves it outside the vocabulary and the loss gets `Target 3 is out of bounds`",
      {'valid_classes_unseen'}, epochs=4, lr=1e-2)
def tabular_valid_class_unseen(fixed):
    """'Validation set contains unseen category as target': 'there is no check if the validation set contains an unseen
    category which is not in the vocabulary in the target label. In fastai v1 you would get a warning that this sample
    in the validation set will be discarded and in v2 you get a `NaN` value in the target label which causes problems
    later on when calling `fit`' ('IndexError: Target 3 is out of bounds.'). The reporter's remedy is v1's: drop the
    validation rows whose label training never saw. Ported with fastai's own API: `TabularPandas` (Normalize, a
    `CategoryBlock` target) and `tabular_learner` (64-64), a split by position in which the last 40 of 120 validation
    rows carry a fourth class; the twin drops those rows before the split. The training batches are healthy: the bug
    shows only when the first validation reaches a row of the unseen class. Measured: the bug trains its first epoch's
    15 batches (loss ratio 0.46) and stops at the first validation with the thread's `IndexError: Target 3 is out of
    bounds.`; the twin's loss ratio 0.28 (accuracy 0.99 after 4 epochs)"""
    from fastai.tabular.all import TabularPandas, Normalize, CategoryBlock, tabular_learner
    df, train, valid = _late_class_frame()
    if fixed:
        seen = set(df.y.iloc[train])
        valid = [i for i in valid if df.y.iloc[i] in seen]
    to = TabularPandas(df, procs=[Normalize], cont_names=['x0', 'x1', 'x2', 'x3'], y_names='y', y_block=CategoryBlock(),
                       splits=(train, valid))
    return tabular_learner(to.dataloaders(bs=32), layers=[64, 64], metrics=accuracy)
