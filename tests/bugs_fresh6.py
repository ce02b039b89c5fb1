"""Bug zoo, family 9 (issue 45): a sixth fresh set, mostly from Q&A sites (Cross Validated, Data Science Stack Exchange,
Stack Overflow), with GitHub issues where no forum thread of the same bug could be found. See `bugzoo.py`. Each case cites
its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever run, under the tool or not.
Cases were chosen for how common the bug is (regression targets in their raw units, a learning rate too high for unscaled
inputs (twice), a tanh output under a log loss, a weight decay of 0.5, dropout left on in validation, BatchNorm at a batch
of one, a learning rate too high for a classifier that first learns, evaluation mode left on after a validation inside the
epoch),
never for whether the tool catches it. Some leave every per-layer statistic of training healthy (dropout at validation,
BatchNorm statistics at a batch of one, training in evaluation mode): their docstrings say so. `wd_too_high` and
`eval_mode_in_training` are kinds no check raises (assumed). A tenth case (mlpack/examples#213, test pixels left raw) was
dropped: its port could not reproduce the reported chance-level test accuracy."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _blobs
from bugs_fresh import _gen


# ---- targets and inputs in their raw units ----
def _houses(n=2000, seed=0):
    "Eight standardised house features and a price in dollars around 250,000 (a linear part, an interaction, noise)"
    g = _gen(seed)
    x = torch.randn(n, 8, generator=g)
    w = torch.tensor([30., -20., 15., 10., 0., 5., -8., 12.]) * 1000
    y = 250_000 + x @ w + 10_000 * x[:, 0] * x[:, 1] + 5_000 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)

@case("https://stats.stackexchange.com/questions/409000",
      "house prices around $250,000 are regressed in dollars by an MLP under MSE and Adam: the output crawls up from zero",
      {'target_scale'}, epochs=4, lr=1e-3)
def house_prices_in_dollars(fixed):
    """'Should we normalize target data as well as input data?': the housing data of Hands-On Machine Learning, a mean price
    near $250,000, a small ReLU network with one linear output; without setting the output bias to the mean 'after 2,000
    epochs, the network was still working the outputs slowly up from zero towards the mean 250,000 value, and the training
    errors were still stupidly high. I was using ADAM'; the answers: scale the target (and unscale the predictions). Eight
    standardised synthetic features here, Adam at 1e-3 (Keras's default), MSE; the twin standardises the price. Measured:
    the loss stays at 6.2-6.4e10 for 4 epochs (outputs near 210 dollars); the twin's falls to 0.02"""
    x, y = _houses()
    return Learner(tensor_dls(x, (y - y.mean()) / y.std() if fixed else y, bs=32),
                   nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)),
                   loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

class _Line(nn.Module):
    "`hypo = x * one + two`, both drawn from a standard normal as `tf.random_normal([1])`"
    def __init__(self):
        super().__init__()
        self.one, self.two = nn.Parameter(torch.randn(1)), nn.Parameter(torch.randn(1))
    def forward(self, x): return x * self.one + self.two

@case("https://stackoverflow.com/questions/48335501",
      "a line is fitted to x from 5 to 40 by plain gradient descent at 0.01: the weights go to 1e33, then NaN",
      {'lr_too_high', 'loss_diverging'}, epochs=3)
def line_fit_lr_too_high_for_x(fixed):
    """'How to know correct learning rate for GradientDescentOptimizer': `x_data = [5, 10, ..., 40]`, `y_data = [2, 4, ...,
    16]`, `hypo = x_data * one + two`, the mean squared error, `GradientDescentOptimizer(0.01)`: the weights print
    -1.06e12, -5.4e22, -2.7e33, then `nan`; 'if i choose learning rate as 0.001 then i am getting correct output'. With
    x up to 40 the squared error's curvature is about 2·E[x²] ≈ 1,000, so a step of 0.01 overshoots ten-fold. 400 points of
    x uniform in [5, 40] (y = 0.4 x), batches of 8 (the report: 8 points, full batch); the twin steps at 0.001. Measured:
    the loss passes 1e26 and is NaN from the 19th batch; the twin's falls"""
    g = _gen(0)
    x = 5 + 35 * torch.rand(400, 1, generator=g)
    return Learner(tensor_dls(x, 0.4 * x, bs=8), _Line(), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD), lr=0.001 if fixed else 0.01)


class _Slope(nn.Module):
    "`forward(X, W) = W * X`: one weight, started at 0, no bias"
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
    def forward(self, x): return self.w * x

@case("https://datascience.stackexchange.com/questions/117008",
      "y = 2x is fitted by gradient descent at 0.01 where a few x are 100 or 200 among values 1..5: the slope never converges",
      {'lr_too_high', 'loss_diverging', 'input_scale'}, epochs=3)
def slope_fit_uneven_large_x(fixed):
    """'Normalising data for simple linear regression': `X = [1,2,3,4,5,100,200]`, `Y = 2X`, a weight started at 0, the mean
    squared error's gradient, `lr = 0.01`: 'it never converges and gives a W ... too different from the actual value of 2 ...
    the solution does not work for large values of X ... or unevenly spaced X'; the answer: 'Gradient descent works
    perfectly fine when your features have large values, but you might have to use a smaller learning rate ... simply
    decreasing the learning rate to 0.00001 allows the model to converge ... Generally input features are normalized', and
    the asker: 'the trick is to standardise data'. Both the step and the inputs' scale are named, so the truth holds both.
    700 points, most x in 1..5 and one in seven 100 or 200, batches of 7 (the report's full batch); the twin steps at 1e-5.
    Measured: the loss passes 1e29 within the first batches and is NaN from the 19th; the twin's falls to 1e-11"""
    g = _gen(0)
    x = torch.where(torch.rand(700, 1, generator=g) < 1 / 7, 100. * torch.randint(1, 3, (700, 1), generator=g),
                    torch.randint(1, 6, (700, 1), generator=g).float())
    return Learner(tensor_dls(x, 2 * x, bs=7), _Slope(), loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.SGD),
                   lr=1e-5 if fixed else 0.01)


# ---- the output and the loss ----
class _TanhNet(nn.Module):
    "A one-hidden-layer classifier whose output unit goes through `out_act` (tanh in the report, the logistic in the answer)"
    def __init__(self, n_in=30, hid=16, act=None):
        super().__init__()
        self.hidden, self.out, self.out_act = nn.Sequential(nn.Linear(n_in, hid), nn.Tanh()), nn.Linear(hid, 1), act or nn.Tanh()
    def forward(self, x): return self.out_act(self.out(self.hidden(x)))

def _log_loss(a, y):
    "The cross-entropy as the question codes it on the output `a`: `-(y log a + (1 - y) log(1 - a))`, averaged"
    y = y.float().view_as(a)
    return -(y * torch.log(a) + (1 - y) * torch.log(1 - a)).mean()

@case("https://stats.stackexchange.com/questions/65977",
      "a binary classifier's output unit is a tanh under the cross-entropy: its outputs in (-1, 1) meet a log, the loss is NaN",
      {'output_activation', 'nonfinite_loss'}, layer='out_act', epochs=3, lr=0.05)
def tanh_output_under_log_loss(fixed):
    """'The tanh activation function in backpropagation': 'when the output activation function is tanh and the number of
    classes is 2 (binary problem), the value obtained at the output layer is in the range between -1 to 1. The cross-entropy
    error function has log ... if one of the output values is a negative number, an invalid operation ... occurs'; the
    answer: a single logistic unit for binary classification ('tanh is just the logistic scaled and translated ... just
    replace a_output with 0.5*(a_output + 1)'). A tanh network on scikit-learn's breast-cancer data (standardised), the
    loss coded as in the question, SGD at 0.05; the twin's output unit is the logistic. Measured: the loss is NaN from the
    first batch; the twin's falls from 0.73 to 0.25"""
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    x = torch.tensor(d.data, dtype=torch.float32)
    return Learner(tensor_dls((x - x.mean(0)) / x.std(0), torch.tensor(d.target).float(), bs=32),
                   _TanhNet(act=nn.Sigmoid() if fixed else nn.Tanh()), loss_func=_log_loss,
                   opt_func=torch_opt(torch.optim.SGD))


# ---- the optimiser ----
def _boxes(n=1200, size=16, seed=0):
    "Images `(n, 1, size, size)` of noise with one bright 4×4 square; its centre's (row, column) in [0, 1] as the target"
    g = _gen(seed)
    x, t = 0.2 * torch.randn(n, 1, size, size, generator=g), torch.zeros(n, 2)
    for i in range(n):
        r, c = torch.randint(0, size - 4, (2,), generator=g).tolist()
        x[i, 0, r:r + 4, c:c + 4] += 1
        t[i] = torch.tensor([r + 2., c + 2.]) / size
    return x, t

@case("https://github.com/BVLC/caffe/issues/1396",
      "a CNN regressing coordinates is trained with a weight decay of 0.5: weights shrink to zero, one output for any input",
      {'wd_too_high', 'constant_output'}, epochs=4, lr=0.01)
def weight_decay_half_same_output(fixed):
    """'Any input produce the same output': a network regressing coordinates (body joints in the thread) gives one output for
    every image; a user's fix, confirmed in the thread: 'I change the weight_decay to a small number (0.0005), then it is
    normal. I think the if the weight_decay is large (like 0.5), all the weight will eventually becomes zero'. A small CNN
    regressing the centre of a bright square, MSE, SGD at 0.01 with momentum 0.9 (Caffe's usual solver) and `weight_decay`
    0.5; the twin's is 0.0005. Measured: by the end every image gets the same output (the validation loss 0.071, the
    variance of the centres; the twin's 0.005). `wd_too_high` is assumed (no check raises it)"""
    x, t = _boxes()
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 2))
    return Learner(tensor_dls(x, t, bs=32), model, loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=5e-4 if fixed else 0.5))

def _binary_digits():
    "The digits as `(n, 1, 8, 8)` images in [0, 1] and a 0/1 label (digit below 5 or not), as float `(n, 1)`"
    x, y = _digit_images()
    return x, (y >= 5).float().unsqueeze(1)

@case("https://datascience.stackexchange.com/questions/28481",
      "a binary CNN under SGD first fits, then collapses to predicting 0.5 for everything: the learning rate is too high",
      {'lr_too_high', 'constant_output'}, epochs=10)
def binary_cnn_collapses_to_half(fixed):
    """'Reason for having both low loss and same predicted class': a CNN for binary classification, binary cross-entropy,
    SGD at 0.01, batches of 128, balanced classes: 'The accuracy reached over 0.99 eventually ... But after a few more
    epoches, the model converges to loss 0.6 and accuracy 0.5. An inspection of the model shows that it always predicts
    0.5'; the answer: 'it might be an issue of too high learning rate ... I would suggest reducing the learning rate to 0.001
    and using Adam'. A small CNN on the digits (below 5 or not), a sigmoid output under Keras's binary cross-entropy; plain
    SGD at a rate too high for this network (1.0 here: the report's 0.01 was too high for its network, not for this small
    one): the validation loss falls to 0.31 at the seventh epoch, then the network collapses to an almost constant output
    (0.53 ± 0.01) at a loss of 0.68; the twin follows the answer, Adam at 1e-3"""
    x, y = _binary_digits()
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, 1), nn.Sigmoid())
    return Learner(tensor_dls(x, y, bs=128), model, loss_func=keras_bce, lr=1e-3 if fixed else 1.0,
                   opt_func=torch_opt(torch.optim.Adam) if fixed else torch_opt(torch.optim.SGD))

class _LSTMClassifier(nn.Module):
    "An LSTM over a sequence and a linear layer on its last state, one logit per class"
    def __init__(self, n_in=1, hid=64, n_out=4):
        super().__init__()
        self.rnn, self.head = nn.LSTM(n_in, hid, batch_first=True), nn.Linear(hid, n_out)
    def forward(self, x): return self.head(self.rnn(x)[0][:, -1])

def _four_kinds(n=2400, steps=30, seed=0):
    "Sequences `(n, steps, 1)` of four types (a sine, a square wave, a ramp, noise) with random phase and amplitude; the type"
    g = _gen(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.linspace(0, 6.283, steps).expand(n, steps)
    phase, amp = 6.283 * torch.rand(n, 1, generator=g), 0.5 + torch.rand(n, 1, generator=g)
    s = torch.sin(t * 2 + phase)
    waves = torch.stack([s, torch.sign(s), ((t + phase) % 3.14) / 1.57 - 1, torch.randn(n, steps, generator=g)], 1)
    x = amp * waves[torch.arange(n), y] + 0.2 * torch.randn(n, steps, generator=g)
    return x.unsqueeze(-1), y

@case("https://stats.stackexchange.com/questions/324896",
      "an LSTM classifying four kinds of sequences fits to over 90%, then its training loss climbs: the learning rate is too big",
      {'lr_too_high', 'loss_diverging'}, epochs=8)
def rnn_classifier_loss_climbs(fixed):
    """'Training loss increases with time': an RNN classifying 4 types of sequences under cross-entropy, 'I see the training
    loss going down until the point where I correctly classify over 90% of the samples in my training batches. However a
    couple of epochs later I notice that the training loss increases and that my accuracy drops'; the asker's update: 'It
    turned out that the learning rate was too high. With low a low enough learning rate I dont observe this behaviour'. An
    LSTM of 64 on four synthetic kinds of waves, cross-entropy, Adam at a rate too high for it (0.03; the report's 2e-4 was
    too high for its network): the validation accuracy reaches 0.975 at the fourth epoch, then the losses climb back to
    1.2-1.6 and the accuracy falls to 0.38; the twin at 3e-3 reaches 0.90"""
    x, y = _four_kinds()
    return Learner(tensor_dls(x, y, bs=64), _LSTMClassifier(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), lr=3e-3 if fixed else 0.03)


# ---- training and evaluation modes ----
class _TrainModeInValidation(Callback):
    "The notebook's validation loop: no `model.eval()`, so the model is validated in training mode (dropout on)"
    order = 50   # after fastai's `TrainEvalCallback`, which puts the model in evaluation mode
    def before_validate(self): self.model.train()

class _DropoutMLP(nn.Module):
    "The course's MNIST MLP: two hidden layers of 512 with ReLU and dropout 0.2, ten outputs"
    def __init__(self, n_in=64):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(n_in, 512), nn.Linear(512, 512), nn.Linear(512, 10)
        self.dropout = nn.Dropout(0.2)
    def forward(self, x): return self.fc3(self.dropout(F.relu(self.fc2(self.dropout(F.relu(self.fc1(x)))))))

@case("https://github.com/udacity/deep-learning-v2-pytorch/issues/3",
      "an MLP with dropout is validated without `model.eval()`: every validation loss and accuracy is measured with dropout on",
      {'train_mode_in_eval', 'eval_nondeterministic'}, epochs=6, lr=0.01)
def validated_with_dropout_on(fixed):
    """'why don't we use model.eval() for the validation and test time and model.train() for training? We have dropout in
    the model, so I think we should switch between 2 modes'; the instructor: 'You're absolutely right. Any model with
    dropout or batch normalization will have different behavior during training and evaluation. This was an oversight of
    mine and I've just updated the code'. The notebook's MLP (512, 512, dropout 0.2), cross-entropy, SGD at 0.01, on the
    digits scaled to [0, 1]; a callback puts the model back in training mode before each validation. Training is untouched:
    no statistic of a layer in training sees it"""
    x, y = digits_raw()
    learn = Learner(tensor_dls(x / 16, y, bs=20), _DropoutMLP(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                    opt_func=torch_opt(torch.optim.SGD))
    if not fixed: learn.add_cb(_TrainModeInValidation())
    return learn

class _NormSegmenter(nn.Module):
    "A small fully convolutional segmenter: three 3×3 convolutions, each followed by `norm(channels)` and ReLU, a 1×1 head"
    def __init__(self, norm, n_out=2):
        super().__init__()
        def block(i, o): return [nn.Conv2d(i, o, 3, padding=1), norm(o), nn.ReLU()]
        self.body, self.head = nn.Sequential(*block(1, 16), *block(16, 32), *block(32, 32)), nn.Conv2d(32, n_out, 1)
    def forward(self, x): return self.head(self.body(x))

def _pixel_accuracy(out, m): return (out.argmax(1) == m).float().mean()

def _scans(n=300, seed=0):
    "Segmentation blobs whose every image has its own gain and offset (scans from different machines), masks of 0 and 1"
    x, m = _blobs(n=n, seed=seed)
    g = _gen(seed + 1)
    return x * (0.3 + 3 * torch.rand(n, 1, 1, 1, generator=g)) + 2 * torch.randn(n, 1, 1, 1, generator=g), m

@case("https://github.com/wolny/pytorch-3dunet/issues/53",
      "a segmentation network with BatchNorm is trained at a batch size of 1: in evaluation mode its predictions make no sense",
      {'eval_stats_stale'}, epochs=3, lr=1e-3)
def batchnorm_batch_of_one(fixed):
    """'I used batch normalization (erroneously, for a batch size of 1), and during testing my predictions didn't make any
    sense. However, when I set the model to 'train' mode ... the predictions were fine': at a batch of one each image is
    normalised by its own statistics in training, while evaluation uses running averages over images that differ; the
    repository's configurations use GroupNorm, which the twin uses. A small fully convolutional segmenter of noisy
    rectangles whose images each have their own gain and offset, cross-entropy, Adam at 1e-3, batches of 1. The training
    losses look healthy (0.27 to 0.008); the validation loss climbs from 1.7 to 3.8 at a pixel accuracy of 0.48 (the twin:
    0.018 and 0.994). Every BatchNorm is at fault (no single layer: `layer` is left unset)"""
    x, m = _scans()
    norm = (lambda c: nn.GroupNorm(4, c)) if fixed else nn.BatchNorm2d
    return Learner(tensor_dls(x, m, bs=1), _NormSegmenter(norm), loss_func=nn.CrossEntropyLoss(), metrics=_pixel_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

class _ValidateEvery(Callback):
    """VSE++'s `train.py`: every `every` batches `validate()` calls `model.val_start()` (evaluation mode) and, in the bug,
    never `model.train_start()`: training goes on in evaluation mode until the next epoch's `train_start`"""
    order = 60
    def __init__(self, xb, every=10, restore=False):
        self.xb, self.every, self.restore, self.n, self.in_eval = xb, every, restore, 0, 0
    def after_batch(self):
        if not self.training: return
        self.n += 1
        if self.n % self.every == 0:
            self.model.eval()
            with torch.no_grad(): self.model(self.xb)
            if self.restore: self.model.train()
    def before_batch(self):
        if self.training and not self.model.training: self.in_eval += 1   # training batches run in evaluation mode

class _DropBNNet(nn.Module):
    "An encoder as VSE++'s heads have them: linear layers with BatchNorm and dropout, ten classes"
    def __init__(self, n_in=64):
        super().__init__()
        self.fc1, self.bn1, self.fc2 = nn.Linear(n_in, 256), nn.BatchNorm1d(256), nn.Linear(256, 256)
        self.bn2, self.drop, self.out = nn.BatchNorm1d(256), nn.Dropout(0.5), nn.Linear(256, 10)
    def forward(self, x):
        return self.out(self.drop(F.relu(self.bn2(self.fc2(self.drop(F.relu(self.bn1(self.fc1(x)))))))))

@case("https://github.com/fartashf/vsepp/issues/4",
      "a validation inside the epoch puts the model in evaluation mode and never back: dropout and BatchNorm off for the rest",
      {'eval_mode_in_training'}, epochs=4, lr=1e-3)
def validation_leaves_eval_mode(fixed):
    """'Finish validation without running model.train()': `if model.Eiters % opt.val_step == 0: validate(opt, val_loader,
    model)` calls `model.val_start()` 'to stop the batch_norm and dropout layers ... However, it will not call
    model.train_start() until next epoch, that may cause the dropout and batch_norm layers will only activate in the first
    val_step steps for each epoch'; the maintainer: 'I'm observing non-negligible changes in the results' (the fix adds the
    `train_start` after validation, behind a flag). An MLP with BatchNorm and dropout 0.5 on the digits, Adam at 1e-3; a
    callback validates every 10 batches in evaluation mode and (the twin) restores training mode: 150 of the 176 training
    batches run in evaluation mode (training loss 0.07 against the twin's 0.19, dropout off). `eval_mode_in_training` is
    assumed (no check raises it); the layers' statistics look like those of a healthy network in evaluation mode"""
    x, y = digits_raw()
    x = x / 16
    learn = Learner(tensor_dls(x, y, bs=32), _DropBNNet(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                    opt_func=torch_opt(torch.optim.Adam))
    learn.add_cb(_ValidateEvery(x[:64], every=10, restore=fixed))
    return learn
