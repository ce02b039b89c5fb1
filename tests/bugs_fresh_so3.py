"""Bug zoo, a third fresh family from Stack Overflow and its neighbours (issue 58): questions about a loss that does not
move or grows every epoch and a network whose output is the same for every input, each with the answer or the confirmed
finding that named the bug. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and
committed before the case was ever run under the tool. Cases were chosen for how common the bug is (a ReLU on the output
of a regressor whose pre-activation starts negative, a learning rate too large for unscaled inputs), never for whether
the tool catches it. Each bug was checked with plain fastai before any run under the tool: it shows its thread's
symptom, and its fixed twin trains. The search was asked for six cases and found few it could port: the stored copy of
Stack Overflow holds few `pytorch` questions on these symptoms, most pages found were generated checklists with no
thread behind them, and several threads found had no answer in the stored copy, or were already cited by another family.
Where the thread is read in a copy of Stack Overflow at another address, the docstring says so."""
from bugzoo import *
from bugs_data import _dls, _keras_init


# ---- the output activation: a ReLU on a regressor's output ----
_LO, _HI = 1.07312, 20.38941   # the thread's interval

class _Approximator(nn.Module):
    "The thread's approximator: hidden layers of 100, 75, 50 and 25 ReLU units, one output (through `F.relu` if `relu`)"
    def __init__(self, relu):
        super().__init__()
        self.l1, self.l2, self.l3, self.l4 = nn.Linear(1, 100), nn.Linear(100, 75), nn.Linear(75, 50), nn.Linear(50, 25)
        self.output_layer, self.relu = nn.Linear(25, 1), relu
    def forward(self, x):
        for l in (self.l1, self.l2, self.l3, self.l4): x = F.relu(l(x))
        return F.relu(self.output_layer(x)) if self.relu else self.output_layer(x)

@case("https://discuss.pytorch.org/t/enforcing-positive-output-values/106851",
      "an approximator of f(x) = x ends in `F.relu`: where the random initialisation makes every pre-activation "
      "negative, the output is 0 for every input and no gradient reaches any weight",
      {'output_activation', 'dead', 'constant_output'}, layer='output_layer', epochs=6, lr=1e-3)
def approximator_relu_output_stuck(fixed):
    """'Enforcing positive output values': a network with hidden layers of 100/75/50/25 neurons approximating `f(x) = x`
    on [1.07312, 20.38941]; with a linear output it converges from every initialisation, but with `return
    F.relu(self.output_layer(x))` 'when random weights produce negative output values, it gets stuck at 0, due to zero
    gradients, as mentioned in the first answer' of the poster's earlier thread; a softplus output trained. The twin is
    the linear output the poster started from (which 'converges for both random weight initializations'). The thread's
    optimiser and batches are not in the stored copy: Adam at 1e-3, 400 points of the interval, batches of 32, MSE. The
    port seeds PyTorch's default initialisation (seed 0) at one where every pre-activation of the output is negative on
    the interval (-0.95 to -0.11), the unlucky case the thread describes; the twin starts from the same weights. The
    ReLU is functional, so no module holds it: the culprit named is `output_layer`, whose outputs are all negative.
    Measured (6 epochs): every validation prediction is 0.000, the validation loss is 147.93 (the mean square of the
    targets) at every epoch and the batch losses only wander with their batches (ratio 0.98): no gradient reaches a
    weight. The twin's loss ratio is 0.015 (validation 132 to 1.03, predictions from 1.7 to 18.5)"""
    x = _LO + (_HI - _LO) * torch.rand(400, 1, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = _Approximator(relu=not fixed)
    return Learner(tensor_dls(x, x.clone(), bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))


# ---- the learning rate: too large for inputs up to 20 ----
def _halves(lo, hi):
    "The thread's data: x = lo..hi step 1, y = x / 2, as `(n, 1)` floats"
    x = torch.arange(lo, hi + 1, dtype=torch.float32).unsqueeze(1)
    return x, x / 2

@case("https://fixeme.com/why-is-my-loss-function-increasing-with-each-epoch/",
      "a one-unit linear regression on inputs 1 to 20 is trained by SGD at Keras's default rate 0.01: each step "
      "overshoots and the loss grows every epoch",
      {'lr_too_high', 'loss_diverging'}, epochs=40)
def linear_regression_sgd_rate_diverges(fixed):
    """'Why is my loss function increasing with each epoch?' (a Stack Overflow question, read in the copy at
    fixeme.com): `keras.Sequential([keras.layers.Dense(units=1, input_shape=[1])])`, `optimizer="sgd"` (learning rate
    0.01), MSE, on x = 1..20 and y = x / 2, 500 epochs: the loss goes 451, 1603, 5698, ... and reaches 1.3e13 by epoch
    20. The answer found in the copy: the learning rate is too large, the steps overshoot the minimum; set
    `SGD(learning_rate=0.0001)`. With inputs up to 20 the curvature of the loss is about 2 * mean(x^2) = 287, so any
    rate above 2/287 = 0.007 diverges. Ported: a Keras-initialised `Linear(1, 1)`, MSE, plain SGD on the 20 points in
    one batch (Keras's batches of 32 hold them all), validated on x = 21..25; the twin steps at 1e-4 as the answer says.
    Measured (40 epochs): the loss grows about 3.5-fold an epoch, from 532 to 1.6e24 (validation 7.0e3 to 2.1e25,
    predictions near -4.6e12); the twin's falls from 532 to 54 (loss ratio 0.12, validation 1857 to 191: at 1e-4 it is
    still on its way)"""
    xt, yt = _halves(1, 20)
    xv, yv = _halves(21, 25)
    torch.manual_seed(0)
    return Learner(_dls(xt, yt, xv, yv, bs=20), _keras_init(nn.Linear(1, 1)), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD), lr=1e-4 if fixed else 0.01)
