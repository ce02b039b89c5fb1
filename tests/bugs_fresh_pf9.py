"""Bug zoo, a family from the PyTorch forums (issue 62, pf9): discuss.pytorch.org threads about a model whose loss goes
NaN or will not fall, where a reply names the bug. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`,
`layer`) was written and committed before the case was ever run under the tool. Cases were chosen for how common the
bug is (a root-mean-square loss written as `sqrt(mse)`, whose gradient is NaN the moment the error is exactly 0), never
for whether the tool catches it.

One case, not five: the stored copies of forum threads this session could search hold, for nearly every thread, the
opening post only (the search shows a page from its beginning), and most hits were generated tutorials with no thread
behind them. Threads read and left out, for want of a reply that names a bug and a fix in the copy: 'In a number
sequence 1,2,3,4 estimate the next number using LSTM' (202270: the opening post shows the bug's own warning, a target
of size [1] broadcast against an output of [1, 20], but no reply), 'Loss not converging on a binary classification
problem' (177433: an MLP under SGD at 1e-4, opening post only), 'Loss function finding extreme local minimum' (188664:
constant predictions under `MSELoss(reduction="sum")`, opening post only); 'Why there is still a small change in frozen
layer parameters?' (153740: self-solved, stale gradients move a frozen layer, but training does not fail and no kind of
the vocabulary names it); BatchNorm questions with no bug (18600, 73156, 177382), how-to threads (7358, 23390, 58156),
and threads already cited (43814, 7146, 1765). Each bug was checked with plain fastai before any run under the tool (one
thread, seeds 0 and 1): it shows its thread's symptom, and its fixed twin trains."""
from bugzoo import *
from bugs_data import _dls, _split, _gen


# ---- the loss: a square root of a mean squared error that can be exactly 0 ----
def _diabetes_two_tasks(labelled=0.1, seed=0):
    """scikit-learn's diabetes data standardised, with two regression targets: the disease progression (every patient)
    and the serum measure `s5`, taken out of the inputs and kept for a random tenth of the patients only. Targets are
    `(progression, s5 or 0, has_s5)`"""
    from sklearn.datasets import load_diabetes
    d = load_diabetes()
    x = torch.tensor(d.data, dtype=torch.float32)
    x = (x - x.mean(0)) / x.std(0)
    prog = torch.tensor(d.target, dtype=torch.float32)
    prog = (prog - prog.mean()) / prog.std()
    has = (torch.rand(len(x), generator=_gen(seed)) < labelled).float()
    s5 = x[:, 8] * has
    return torch.cat([x[:, :8], x[:, 9:]], 1), torch.stack([prog, s5, has], 1)

def _two_task_rmse(eps):
    "The sum of the two tasks' root-mean-square errors, the second on labelled rows only (prediction and target masked)"
    def loss(out, t):
        has = t[:, 2]
        rmse1 = torch.sqrt(F.mse_loss(out[:, 0], t[:, 0]) + eps)
        rmse2 = torch.sqrt(F.mse_loss(out[:, 1] * has, t[:, 1]) + eps)   # masked rows: 0 against 0
        return rmse1 + rmse2
    return loss

@case("https://discuss.pytorch.org/t/function-mselossbackward-returned-nan-values-in-its-0th-output/94875",
      "an RMSE loss written as `torch.sqrt(mse)`: on a batch whose error is exactly 0 the square root's gradient is "
      "infinite, the MSE's backward multiplies it by 0 and returns NaN, and every weight turns NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=8, lr=1e-3)
def rmse_sqrt_at_zero_error(fixed):
    """'Function 'MseLossBackward' returned nan values in its 0th output': the error anomaly detection raises when a
    square root is taken of an `nn.MSELoss`. The reply's reproduction, as a stored copy quoting the thread has it
    (e-com-net.com, article 1610540118618177536; the thread's own page is not in the store):
    `loss = torch.sqrt(criterion(x * 0, y))` with `y` zeros, then `print(x.grad)` gives 'tensor([[nan]])'. The square
    root's derivative at 0 is infinite and the MSE's backward multiplies it by an error of 0. The fix ported is a small
    constant under the square root (`sqrt(mse + 1e-8)`), the remedy the diagnosis calls for; the copy shows neither the
    poster's setting nor a confirmation. Ported to where an MSE is exactly 0 in practice, a second task labelled for
    few rows and masked by multiplication, as the reproduction's `x * 0`: the diabetes data standardised, an MLP
    (9-64-2) predicting the disease progression (every row) and the serum measure `s5` (kept for 42 of 442 rows), the
    loss the sum of the two RMSEs, Adam at 1e-3, batches of 16 (36 of the 176 batches hold no `s5` label). No layer
    misbehaves before the loss's backward: the NaN is born in the loss. Measured (seeds 0 and 1 alike): the second
    batch holds no label, its loss is finite (1.03; 1.21) but its gradients NaN, every later batch loss NaN (174 of
    176), every weight NaN, the validation loss NaN from the first epoch; the twin's batch losses fall to 0.73 (0.72)
    of their first, its validation loss from 0.96 to 0.89 (0.94 to 0.86)"""
    x, y = _diabetes_two_tasks()
    xt, yt, xv, yv = _split(x, y, n_valid=80)
    model = nn.Sequential(nn.Linear(9, 64), nn.ReLU(), nn.Linear(64, 2))
    return Learner(_dls(xt, yt, xv, yv, bs=16), model, loss_func=_two_task_rmse(1e-8 if fixed else 0.),
                   opt_func=torch_opt(torch.optim.Adam))
