"""Bug zoo, a seventh fresh family from Stack Overflow and Cross Validated (issue 58): questions about a network that
trains badly (a loss that turns NaN after training well, predictions that stay flat), each with the answer that named
the bug. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the
case was ever run under the tool. Cases were chosen for how common the bug is (a cross-entropy written by hand as
`-sum(y * log(softmax))`, which is NaN as soon as one probability underflows to 0; R's `nnet`, whose output unit is a
logistic unless `linout = TRUE`, asked to fit targets scaled to [-1, 1]), never for whether the tool catches it. Each
bug was checked with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin
trains.

The search was asked for five cases and found two it could port faithfully. The stored copies of Stack Overflow and
Cross Validated hold few such threads with their answers: most pages found were generated checklists with no thread
behind them, copies of questions without their answers (Cross Validated 261704, a box regressor that predicts the
mean; 387150, three points fitted by Adam at 1e-5; 550353, a softmax normalised over the whole batch), questions other
families already cite (the `(n, 1)` against `(n,)` MSE read at `whosebug.com`, the same question as the PyTorch-forum
thread of `bugs_fresh8`; the unnormalised Keras CNN of `pullrequest.ru` 10248037, cited through `xue-jishu.com` by
`bugs_fresh_so5`), a checklist for an answer (Stack Overflow 41488279), a bug already in the zoo three times (a softmax
over one output unit), or fixes whose claimed symptom the port did not reproduce: Stack Overflow 37232782 ('NaN loss
when training regression network', 35 one-hot features, plain SGD at 0.01, the answer normalising the targets) trained
without a NaN in the setting tried, and Stack Overflow 42327543 (Adam 'goes haywire' after long training, the answer
raising `epsilon`) showed no blow-up in 1,760 batches on the digits. Stack Overflow 33712178, left out by
`bugs_fresh_so6` because its port kept the smallest probability near 1e-12, is ported here at a learning rate high
enough for the network to grow as confident as the thread's did."""
import torch.nn.functional as F
from fastai.metrics import accuracy
from bugzoo import *


# ---- the loss: a hand-written cross-entropy takes the log of a probability that reached 0 ----
def _hand_cross_entropy(clip):
    """The thread's `-reduce_sum(y_ * log(y_conv))` on one-hot targets, averaged over the batch (under Adam a sum and a
    mean take the same steps); with `clip`, the answer's `clip_by_value(y_conv, 1e-10, 1.0)` inside the log"""
    def loss(out, t):
        p = F.softmax(out, 1)
        if clip: p = p.clamp(1e-10, 1.)
        return -(F.one_hot(t, out.shape[1]).float() * torch.log(p)).sum(1).mean()
    return loss

@case("https://stackoverflow.com/questions/33712178",
      "the cross-entropy is written by hand as `-sum(y * log(softmax(out)))`: once a wrong class's probability "
      "underflows to 0, `0 * log(0)` makes the loss NaN",
      {'nonfinite_loss'}, epochs=15, lr=1e-2)
def hand_cross_entropy_log_zero(fixed):
    """'Tensorflow NaN bug?': a network whose loss is written `cross_entropy = -tf.reduce_sum(y_*tf.log(y_conv))`
    trains, then its values turn NaN. The poster's accepted answer (read in the copy quoted at
    e-com-net.com/article/1304760392261603328.htm): 'In some samples, certain classes could be excluded
    with certainty after a while, resulting in y_conv=0 for that sample ... it yields 0*log(0) for that particular
    sample/class. Hence the NaN', fixed by `tf.log(tf.clip_by_value(y_conv,1e-10,1.0))`. The digits standardised, an
    MLP (64-256-256-10), the softmax then the hand-written log, Adam at 1e-2 (in 15 epochs at 1e-3 the smallest
    probability only reaches 9e-18, at 1e-4 4e-8: no NaN), batches of 32; the twin clips the probabilities as the
    answer does. Measured over 15 epochs: the run trains well (validation accuracy 0.950 after the first epoch,
    0.972 after the tenth), then the loss is NaN from batch 457 of 660 (the eleventh epoch) and every later one,
    validation accuracy 0.106; the twin never meets a NaN and ends at an accuracy of 0.975 (loss ratio 0.11)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), model, loss_func=_hand_cross_entropy(clip=fixed),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- the output range: R's nnet ends in a logistic unit unless `linout = TRUE` ----
def _line(n=500, seed=0):
    "The thread's data: `x` uniform on [0, 50], `y = x / 3 + N(0, 1)`; `x` standardised, `y` mapped onto [-1, 1]"
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g) * 50
    y = x / 3 + torch.randn(n, 1, generator=g)
    return (x - x.mean()) / x.std(), 2 * (y - y.min()) / (y.max() - y.min()) - 1

class _NNet(nn.Module):
    "`nnet(y ~ x, size=1)`: one input, one logistic hidden unit, and an output unit that is logistic unless `linout`"
    def __init__(self, linout):
        super().__init__()
        self.hidden, self.out = nn.Linear(1, 1), nn.Linear(1, 1)
        self.out_act = nn.Identity() if linout else nn.Sigmoid()
    def forward(self, x): return self.out_act(self.out(torch.sigmoid(self.hidden(x))))

@case("https://stats.stackexchange.com/questions/508704",
      "R's `nnet` is used for a regression with its default logistic output unit (`linout = FALSE`) while the targets "
      "are scaled to [-1, 1]: no prediction can go below 0",
      {'target_range', 'output_activation'}, epochs=30, lr=0.05)
def nnet_logistic_output_negative_targets(fixed):
    """'nnet package for OLS': data simulated as `y = x/3 + noise`, the targets scaled to (-1, 1) by a `range11`
    function, `nnet(y ~ x, anntrain, size=annSize)` with one hidden unit: 'the predictions are flat and don't capture
    the line', while dividing `y` by its maximum instead 'works like a charm'. The one answer: 'The actual problem might
    be with bounding the predictions to lie within (0,1). The nnet function of the nnet package uses a sigmoid
    transformation in the output layer by default; see the argument linout = FALSE ... But you are doing regression'.
    The thread's 500 points, one logistic hidden unit, MSE (nnet's sum of squares, averaged), Adam at 0.05 on batches
    of 25 in place of nnet's BFGS; `x` is standardised, since under Adam the raw 0..50 input left the single hidden unit
    saturated in some seeds, the twin's too. The twin sets `linout = TRUE` (a linear output unit) as the answer says.
    Measured over 30 epochs (seeds 0, 1, 2): the loss falls while the upper half of the line is fitted, then stalls at
    0.14 (loss ratios 0.46 to 0.56; validation 0.158 to 0.159), and no validation prediction goes below 0.002: the half
    of the line under 0 is predicted flat at 0; the twin's loss ends at 0.014 (loss ratios 0.06 to 0.18; validation
    0.012), its predictions running from -0.77 to 0.82. Dividing `y` by its maximum, as the poster did, also trains with
    the logistic output (validation 0.0045). The thread was read in its copy at wiki.hoelee.com"""
    x, y = _line()
    return Learner(tensor_dls(x, y, bs=25), _NNet(linout=fixed), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))
