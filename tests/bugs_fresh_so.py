"""Bug zoo, a fresh family from Stack Overflow and Cross Validated (issue 57): questions about a Keras model whose
training misbehaved, each with the answer that named the bug. See `bugzoo.py`. Each case cites its thread; its truth
(`kinds`, `layer`) was written and committed before the case was ever run under the tool. Cases were chosen for how
common the bug is (a softmax over a single output unit, inputs and targets left in their raw units under plain SGD,
BatchNorm moving averages that have not caught up after a few steps on raw pixels), never for whether the tool
catches it. One of them leaves every statistic of training healthy: the BatchNorm case trains normally and only
evaluation, which normalises with the moving averages, goes wrong; its docstring says so. Each bug was checked with
plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains. The search
found few threads with an answer that names one bug (most answers to 'my network does not learn' are checklists), so
the family holds three cases, not six."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images
from bugs_fresh import _gen


# ---- the output layer: a softmax over one unit ----
def _answer_in_input(n=600, seed=0):
    """The thread's set-up: a boolean to predict, written into the input ('The output boolean is in the input in the 3rd
    dimension'): 2-channel 10×10 maps, channel 0 noise, channel 1 the label (0 or 1) plus noise; targets `(n, 1)`"""
    g = _gen(seed)
    y = (torch.rand(n, generator=g) < 0.4).float()
    x = 0.5 * torch.randn(n, 2, 10, 10, generator=g)
    x[:, 1] += y.view(-1, 1, 1)
    return x, y.unsqueeze(1)

class _AnswerCNN(nn.Module):
    "The thread's CNN scaled down: Conv2D(30, 3), Conv2D(64, 3) with ReLU, flatten, `Dense(1)`, its activation `out`"
    def __init__(self, softmax=True):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(2, 30, 3), nn.ReLU(), nn.Conv2d(30, 64, 3), nn.ReLU(), nn.Flatten())
        self.head = nn.Linear(64 * 6 * 6, 1)
        self.out = nn.Softmax(dim=1) if softmax else nn.Sigmoid()
    def forward(self, x): return self.out(self.head(self.body(x)))

def _keras_categorical_ce(p, y, eps=1e-7):
    "Keras's `categorical_crossentropy` on probabilities `(n, classes)`: clipped, minus the sum of `y * log(p)` per row"
    return -(y * torch.log(p.clamp(eps, 1 - eps))).sum(1).mean()

def _true_rate(out, y): return ((out > 0.5).float() == y).float().mean()   # Keras rounds the predictions (`np.round`)

@case("https://stats.stackexchange.com/questions/481881/convolutional-neural-network-fails-even-when-given-answer",
      "a binary classifier ends in `Dense(1, activation='softmax')`: a softmax over one unit is 1 for every input, "
      "its gradient 0",
      {'output_activation', 'constant_output', 'output_classes'}, layer='out', epochs=4, lr=1e-3)
def softmax_over_single_unit_given_answer(fixed):
    """'Convolutional neural network fails even when given answer': a CNN 'giving the prediction as true for everything
    regardless of input'; the asker put the label into the input and it still failed. The model ended in `Dense(1,
    activation='softmax')` under `categorical_crossentropy` and Adam. The thread's one answer (whether it was marked
    accepted is not in the stored copy): 'Your last layer is a fully connected layer with 1 output unit and softmax
    activation' — the softmax of a single value is exp(x)/exp(x) = 1, so the prediction is 1 whatever the input and no
    gradient reaches the network. Ported: 2-channel 10×10 maps whose second channel carries the label (40% positives),
    the thread's two convolutions scaled down, Keras's categorical cross-entropy on the probabilities, Adam at Keras's
    1e-3; the twin ends in a sigmoid under binary cross-entropy, as one output unit needs. Measured over 4 epochs: the
    loss is 4e-8 to 6e-8 on every batch from the first (the clipped log of 1; loss ratio 1.17), every one of the 120
    validation maps is predicted 1 and the accuracy stays at 0.483, the share of positives; the twin's loss falls from
    0.70 to 3e-6 (ratio 5e-6), validation accuracy 1.0 from the first epoch"""
    x, y = _answer_in_input()
    loss = _keras_categorical_ce if not fixed else keras_bce
    return Learner(tensor_dls(x, y, bs=32), _AnswerCNN(softmax=not fixed), loss_func=loss, metrics=_true_rate,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- preprocessing: a regression on raw units ----
def _bmi_to_progression():
    "scikit-learn's diabetes data in raw units: one column (body-mass index, 18 to 42), the target (25 to 346)"
    from sklearn.datasets import load_diabetes
    d = load_diabetes(scaled=False)
    return torch.tensor(d.data[:, 2:3], dtype=torch.float32), torch.tensor(d.target, dtype=torch.float32).unsqueeze(1)

def _keras_dense(n_in, n_out):
    "A Keras `Dense`: Glorot-uniform kernel, zero bias"
    lin = nn.Linear(n_in, n_out)
    nn.init.xavier_uniform_(lin.weight); nn.init.zeros_(lin.bias)
    return lin

@case("https://stats.stackexchange.com/questions/284189/simple-linear-regression-in-keras",
      "a one-node linear regression trained by plain SGD (lr 0.01, batches of 1) on a column and a target in their raw "
      "units: the loss is NaN",
      {'input_scale', 'target_scale'}, epochs=2, lr=0.01)
def linear_regression_unscaled_nan(fixed):
    """'Simple Linear Regression in Keras': 'a simple keras model with a single, one-node linear layer' fitted with
    `keras.optimizers.SGD()` (its default rate 0.01), `batch_size=1, shuffle=False`, one column of a downloaded data set
    predicting another: 'Running the model like that gives me nan loss on every epoch'; only 'a ridiculously small
    learning rate' (1e-7) gave a decent model. The answer (whether it was marked accepted is not in the stored copy):
    'This is probably because there was no normalization done. Neural network are very sensitive to non-normalized
    data', with `StandardScaler` applied to both `x` and `y`, and the tiny rate dropped. Ported: scikit-learn's diabetes
    data unscaled, the body-mass index (18 to 42) predicting the disease progression (25 to 346), a Keras-initialised
    `Linear(1, 1)`, MSE, plain SGD at 0.01, batches of 1 in file order; the twin standardises both columns (statistics
    of the training rows) and keeps the rate. Measured: the loss is 8.6e4 on the first batch, 2.2e7 and 1.8e9 on the
    next two, overflows and is NaN from the 17th batch on (692 of 708 batches NaN, training and validation losses NaN
    for both epochs); the twin's falls from 17 to a median a quarter of its first (loss ratio 0.24), validation MSE 0.68
    in standardised units (the column explains a third of the target's variance)"""
    x, y = _bmi_to_progression()
    if fixed:
        idx = torch.randperm(len(x), generator=_gen(0))[int(len(x) * 0.2):]   # the rows tensor_dls trains on
        x, y = (x - x[idx].mean()) / x[idx].std(), (y - y[idx].mean()) / y[idx].std()
    return Learner(tensor_dls(x, y, bs=1, shuffle=False), _keras_dense(1, 1), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD))


# ---- normalisation: BatchNorm moving averages that lag ----
def _three_kinds_of_digit(n_per=10, seed=0):
    "A few images of the digits 0, 1 and 2 as a file holds them (integer pixels 0 to 240), `(n, 1, 8, 8)`, labels 0..2"
    x, y = _digit_images('byte')
    g, keep = _gen(seed), []
    for k in range(3):
        idx = (y == k).nonzero().squeeze(1)
        keep.append(idx[torch.randperm(len(idx), generator=g)[:n_per]])
    keep = torch.cat(keep)
    return x[keep], y[keep]

def _resnet(momentum):
    "torchvision's ResNet-18, random weights, one input channel, 3 classes; each BatchNorm's momentum set to `momentum`"
    from torchvision.models import resnet18
    model = resnet18(weights=None, num_classes=3)
    model.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d): m.momentum = momentum
    return model

@case("https://stackoverflow.com/questions/47157526/resnet-100-accuracy-during-training-but-33-prediction-accuracy-with-the-same-data",
      "BatchNorm moving averages (Keras momentum 0.99) still near their initial 0 and 1 after 5 steps on raw pixels: "
      "evaluation normalises with the wrong statistics",
      {'eval_stats_stale'}, epochs=5, lr=1e-3)
def batchnorm_moving_averages_not_caught_up(fixed):
    """'ResNet: 100% accuracy during training, but 33% prediction accuracy with the same data': Keras's
    `ResNet50(weights=None, classes=3)` fitted to three raw grey-scale images for 5 epochs reached 'loss: 1.3815e-04 -
    acc: 1.0000', yet `model.predict` on the same images gave one class for all three. The accepted answer: 'It's
    because of the batch normalization layers ... in testing phase, the batch is normalized w.r.t. the moving average of
    previously observed mean and variance', initialised to 0 and 1 and updated with momentum 0.99, so after a handful of
    steps they are far from the batch statistics; 'You can also verify this by changing the momentum to a lower value'.
    Ported: torchvision's ResNet-18 (random weights, one input channel) on 30 digit images of three classes in raw
    integer pixels (0 to 240), the same images as the validation set (the thread predicted on its training images), all
    30 in one batch (the thread's 3 were one batch) for the thread's 5 epochs, Adam at Keras's 1e-3, every BatchNorm at
    the thread's momentum (Keras 0.99 is PyTorch's 0.01); the twin lowers the Keras momentum to 0.01 (PyTorch 0.99) so
    the averages follow the batches. Training is the same in both: only evaluation, which uses the moving averages,
    differs. No statistic of training shows it. Measured: both twins' training losses are identical, 1.27, 0.31, 0.022,
    0.008, 0.003 (loss ratio 0.026); the bug's validation loss on those same images is 2.65 to 1.85 at an accuracy of
    0.30 to 0.37, all 30 predicted as one class (the thread's symptom); the twin's is 0.55 then 0.04 to 0.002, accuracy
    1.0 from the second epoch"""
    x, y = _three_kinds_of_digit()
    train = DataLoader([(x[i], y[i]) for i in range(len(x))], bs=30, shuffle=True, drop_last=True)   # one batch
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(x[i], y[i]) for i in range(len(x))], bs=30))
    return Learner(dls, _resnet(0.99 if fixed else 0.01), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
