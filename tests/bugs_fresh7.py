"""Bug zoo, family 10 (issue 45): a seventh fresh set, from Q&A sites and forums (Cross Validated, Data Science Stack
Exchange, the fastai forums). See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and
committed before the case was ever run, under the tool or not. Cases were chosen for how common the bug is (pixels left
in 0..255 (twice), a ReLU unit dead from an unlucky initialisation on non-negative features, sigmoid outputs under a
categorical cross-entropy, a learning rate too high for the restarts of a cyclic schedule), never for whether the tool
catches it. The sigmoid outputs under Keras's categorical cross-entropy (which renormalises them) train: no statistic of
training need look wrong, only the output's contract."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _keras_init
from bugs_fresh import _gen
from bugs_fresh6 import _four_kinds


def _byte_pixels():
    "The digits as a file holds them: `(n, 64)` pixels from 0 to 240 (MNIST's 0..255), integer labels"
    x, y = _digit_images('byte')
    return x.view(len(x), -1), y


# ---- pixels left in 0..255 ----
class _ReluMLP(nn.Module):
    "The question's Keras MLP: Dense(128, relu), Dense(128, relu), Dense(10, softmax), Keras's initialisation"
    def __init__(self, n_in=64, hid=128, n_out=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, n_out))
        self.softmax = nn.Softmax(dim=1)
        _keras_init(self)
    def forward(self, x): return self.softmax(self.body(x))

@case("https://stats.stackexchange.com/questions/367057",
      "an MLP of ReLUs under Adam is trained on pixels from 0 to 255: validation accuracy around 20%; scaled to [0, 1] it learns",
      {'input_scale'}, epochs=5)
def relu_mlp_pixels_unscaled(fixed):
    """'Bad performance with ReLU activation function on MNIST data set': Fashion-MNIST flattened, Dense(128, relu) twice and
    a softmax over 10 classes, categorical cross-entropy, Adam: 'This gives me a validation_acc of around 20%' and 'if I
    increase the number of nodes in the hidden layers I often get a network that doesn't learn at all'; the asker's edit:
    'I figured out it has something to do with me not normalizing the input to values between 0 and 1'; the answer (the
    Neural Network FAQ): rescale the inputs. The digits' pixels at 0..240, the same network at 64 inputs, Keras's
    initialisation and clipped cross-entropy, Adam at 1e-3 (Keras's default), batches of 32; the twin divides by 255.
    Measured: validation accuracy 0.34 to 0.47 over 5 epochs at a validation loss of 8.5 (the twin: 0.96 and 0.16)"""
    x, y = _byte_pixels()
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=32), _ReluMLP(), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7), lr=1e-3)

class _SoftmaxRegression(nn.Module):
    "The post's network: no hidden layer, weights `randn / sqrt(n_inputs)`, zero biases, a softmax over the classes"
    def __init__(self, n_in=64, n_out=10):
        super().__init__()
        self.fc, self.softmax = nn.Linear(n_in, n_out), nn.Softmax(dim=1)
        with torch.no_grad(): self.fc.weight.copy_(torch.randn(n_out, n_in) / n_in ** 0.5); self.fc.bias.zero_()
    def forward(self, x): return self.softmax(self.fc(x))

def _per_class_ce(p, y):
    "The post's `average_cross_entropy`: `-log(p)` where the one-hot target is 1, `-log(1 - p)` where it is 0, averaged"
    t = F.one_hot(y, p.shape[1]).float()
    return -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()

@case("https://forums.fast.ai/t/cross-entropy-error-log-1-1-inf/1441",
      "a softmax classifier on raw pixels outputs probabilities of exactly 1 and 0: the cross-entropy's log(1 - 1) is infinite",
      {'input_scale', 'nonfinite_loss'}, epochs=4, lr=1.0)
def softmax_on_raw_pixels_log_inf(fixed):
    """'Cross entropy error: -log(1-1): INF': 'My network is outputting a very confident guess of 1.0 when the target is 0.
    This leads to a numerical problem. This happens 40% of the time'; MNIST's flattened pixels, no hidden layer, weights
    `randn / sqrt(784)`, a softmax, a cross-entropy summing `-log(output)` and `-log(1 - output)` per class; the logits
    printed run from -70 to 142. The poster's edit: 'Normalizing the input solved my problem.' The digits' pixels at
    0..240, the same network and loss, SGD at 1.0; the twin divides the pixels by 255. Measured: the loss is
    NaN from the first batch (a probability of exactly 0 or 1 under the log); the twin's falls from 0.31 to 0.12"""
    x, y = _byte_pixels()
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=32), _SoftmaxRegression(), loss_func=_per_class_ce,
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD))


# ---- a ReLU unit dead from its initialisation ----
class _OneReluUnit(nn.Module):
    "Two layers as the question has them: one hidden ReLU unit, initialised uniform in (-0.05, 0.05), a sigmoid output"
    def __init__(self, n_in=30, unlucky=True):
        super().__init__()
        self.hidden, self.act, self.out, self.out_act = nn.Linear(n_in, 1), nn.ReLU(), nn.Linear(1, 1), nn.Sigmoid()
        with torch.no_grad():
            for m in (self.hidden, self.out): m.weight.uniform_(-0.05, 0.05); m.bias.zero_()
            if unlucky: self.hidden.weight.abs_().neg_()   # the question's case: every weight drawn negative
    def forward(self, x): return self.out_act(self.out(self.act(self.hidden(x))))

@case("https://stats.stackexchange.com/questions/450100",
      "a hidden ReLU unit whose weights all start negative meets features that are all positive: it is dead from the first batch",
      {'dead', 'constant_output'}, layer='act', epochs=8, lr=1e-2)
def relu_unit_dead_on_positive_features(fixed):
    """'Understanding ReLU: does this unlucky initialized network assign all instances to one class?': two features that
    are always positive, one hidden ReLU unit and a sigmoid output, weights drawn uniform in (-0.05, 0.05): 'If the two
    weights of the hidden layer neuron are randomly initialized negative, the neuron will output 0 for all instances ...
    all instances are assigned to class 1'; the answer: 'it can't recover. This is dying ReLU problem ... A better way to
    tackle this case can be standardising your data so that it consist of both positive and negative values'. The
    breast-cancer features (all positive) unscaled, the same two layers with the hidden weights drawn negative, Keras's
    binary cross-entropy, Adam at 1e-2; the twin standardises the features (same unlucky weights).
    Measured: every prediction is 0.619 at the end (the share of class 1 in training), the loss falls only from 0.69 to
    0.65; the twin's falls from 0.67 to 0.21"""
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    x = torch.tensor(d.data, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.float32).unsqueeze(1)
    return Learner(tensor_dls((x - x.mean(0)) / x.std(0) if fixed else x, y, bs=32), _OneReluUnit(), loss_func=keras_bce,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7))


# ---- the output and the loss ----
def _keras_categorical_ce(p, y, eps=1e-7):
    "Keras's `categorical_crossentropy` on outputs `p`: scaled to sum to 1 over the classes, clipped, then the log"
    p = (p / p.sum(1, keepdim=True)).clamp(eps, 1 - eps)
    return F.nll_loss(torch.log(p), y)

class _LSTMHead(nn.Module):
    "An LSTM over the sequence and a Dense layer of one unit per class on its last state, then `out_act`"
    def __init__(self, act, n_in=1, hid=64, n_out=4):
        super().__init__()
        self.rnn, self.head, self.out_act = nn.LSTM(n_in, hid, batch_first=True), nn.Linear(hid, n_out), act
    def forward(self, x): return self.out_act(self.head(self.rnn(x)[0][:, -1]))

@case("https://datascience.stackexchange.com/questions/91069",
      "a 4-class LSTM classifier ends in 4 sigmoid units under categorical cross-entropy: its outputs are no distribution",
      {'output_activation'}, layer='out_act', epochs=4, lr=1e-3)
def sigmoid_units_under_categorical_ce(fixed):
    """'The sum of multi-class prediction is not 1 using tensorflow and keras?': an LSTM(128) text classifier ending in
    `Dense(4, activation='sigmoid')`, `loss='categorical_crossentropy'`, Adam: the predicted rows (0.92, 0.43, 0.70, 0.35)
    do not sum to 1; the answer: 'To get the summation in the last layer to be one, you need to use Softmax activation not
    Sigmoid'. Keras's categorical cross-entropy divides the outputs by their sum, so the network still gets a gradient: no
    statistic of training need look wrong. An LSTM of 64 on four synthetic kinds of waves, the loss as Keras computes it,
    Adam at 1e-3; the twin's last activation is a softmax. Measured: the rows of outputs sum to
    1.96 ± 0.08 and the loss falls as the twin's does (1.39 to 1.24; the twin: 1.39 to 1.20)"""
    x, y = _four_kinds()
    act = nn.Softmax(dim=1) if fixed else nn.Sigmoid()
    return Learner(tensor_dls(x, y, bs=64), _LSTMHead(act), loss_func=_keras_categorical_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7))


# ---- the schedule ----
@case("https://forums.fast.ai/t/stability-of-lstm-training-in-lesson-4/10961",
      "an LSTM classifier trained with warm restarts fits, then a restart's learning rate sends the loss up for good",
      {'lr_too_high', 'loss_diverging'}, epochs=2, fit='fit_sgdr', fit_kw={'cycle_len': 2})
def lstm_restarts_lr_too_high(fixed):
    """'Stability of LSTM training in lesson 4': the sentiment LSTM trained with SGDR (`m3.fit(lrs, 7, cycle_len=2)`):
    epochs 0 to 9 reach 0.925 accuracy, then 'Both training and validation loss suddenly increase twice on epoch 10 and
    never recover' (accuracy 0.41 at epoch 12); Jeremy Howard: 'It means your LR is too high at that part of the training.
    You could try more gradient clipping, or a lower learning rate'; the poster: 'Learning rate was the reason ... Looks
    like 1e-2 is too large'. An LSTM of 64 on four synthetic kinds of waves, cross-entropy, Adam, fastai's `fit_sgdr`
    (2 cycles, of 2 and 4 epochs, each starting at the top rate) at 0.08; the twin's top rate is 3e-3. Measured:
    validation accuracy 0.47, 0.79 in the first cycle, then 0.34 at the restart and 0.45 to 0.53 for the rest (validation
    loss 0.66, then 1.36 and 1.12 to 1.20); the twin's loss falls to 0.47 of its first"""
    from bugs_fresh6 import _LSTMClassifier
    x, y = _four_kinds()
    return Learner(tensor_dls(x, y, bs=64), _LSTMClassifier(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), lr=3e-3 if fixed else 0.08)
