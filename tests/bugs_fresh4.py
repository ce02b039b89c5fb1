"""Bug zoo, family 7 (issue 45): a fourth fresh set, from Stack Overflow, Cross Validated, Data Science Stack Exchange and the
fastai forums. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever
run under the tool. Cases were chosen for how common the bug is (an output activation or a loss that does not fit the task,
unscaled inputs or targets), never for whether the tool catches it. Keras programs are ported
with Keras's initialisation (Glorot-uniform kernels, zero biases) and Keras's losses computed as Keras computes them."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _keras_init
from bugs_fresh import _gen

def _keras_categorical_ce(p, y, eps=1e-7):
    "Keras's `categorical_crossentropy` on probabilities: normalised over the last axis, clipped, then `-sum(y log p)`"
    p = (p / p.sum(-1, keepdim=True)).clamp(eps, 1 - eps)
    return -(y * torch.log(p)).sum(-1).mean()

def _keras_bce_2d(p, y): return keras_bce(p, y.float().view_as(p))


# ---- the output and the loss ----
def _coded_sequences(n=3000, steps=5, n_feat=10, n_codes=5, seed=0):
    "Label-encoded categorical features over `steps` steps, `(n, steps, n_feat)` floats 0..4; a 0/1 label from two features"
    g = _gen(seed)
    x = torch.randint(0, n_codes, (n, steps, n_feat), generator=g).float()
    score = (x[:, :, 0] == 1).float().sum(1) + (x[:, -1, 3] >= 3).float() * 2
    return x, (score >= 2).float().unsqueeze(1)

class _SeqNet(nn.Module):
    "An LSTM over the steps, a dense layer of `n_out` units on its last state, then `act`"
    def __init__(self, n_in=10, hid=32, n_out=1, act=None):
        super().__init__()
        self.rnn, self.out, self.act = nn.LSTM(n_in, hid, batch_first=True), nn.Linear(hid, n_out), act or nn.Sigmoid()
    def forward(self, x): return self.act(self.out(self.rnn(x)[0][:, -1]))

@case("https://stats.stackexchange.com/questions/565956",
      "an LSTM with one sigmoid unit is trained under Keras's `categorical_crossentropy`: over one unit the loss is constant, nothing learns",
      {'output_classes', 'output_activation'}, epochs=4, lr=1e-3)
def lstm_categorical_ce_on_one_unit(fixed):
    """'I have applied categorical_crossentropy but I am getting 26% accuracy with activation function sigmoid. When I apply
    binary_crossentropy, the accuracy drastically increased to 98%'; the answer: with one output neuron the categorical loss
    is bogus ('minimized ... by setting p=1 regardless of the input'), use binary cross-entropy (or k softmax units). Keras
    normalises the probabilities over the last axis before the log, so over one unit the loss is ~1e-7 and every gradient is
    exactly 0. An LSTM (256 units in the report, 32 here) on label-encoded categorical sequences, Adam"""
    x, y = _coded_sequences()
    return Learner(tensor_dls(x, y, bs=64), _SeqNet(), loss_func=_keras_bce_2d if fixed else _keras_categorical_ce,
                   opt_func=torch_opt(torch.optim.Adam))

def _binary_rows(n=3000, steps=8, n_feat=16, seed=0):
    "Binary feature sequences `(n, steps, n_feat)` and a 0/1 class that depends on a few of them"
    g = _gen(seed)
    x = (torch.rand(n, steps, n_feat, generator=g) < 0.5).float()
    return x, ((x[:, :, :4].sum((1, 2)) + 2 * x[:, -1, 5]) > 17).float().unsqueeze(1)

@case("https://stackoverflow.com/questions/47241622",
      "an LSTM classifier ends in `Dense(1, activation='softmax')` under `binary_crossentropy`: a softmax over one unit is always 1",
      {'output_activation', 'constant_output', 'output_classes'}, layer='act', epochs=3, lr=1e-3)
def lstm_softmax_on_one_unit(fixed):
    """Binary samples of 128 features through `LSTM(128)` and `Dense(1, softmax)`, `binary_crossentropy`, Adam: 'I am getting
    bad accuracy, not more than 55%', where an MLP got 97%; the accepted answer: 'You cannot use softmax as an output when you
    have only a single output unit as it will always output you a constant value of 1 ... change output activation to
    sigmoid'. An LSTM of 32 on synthetic binary sequences, Keras's binary cross-entropy (clipped), Adam. The report's labels
    were 1 and -1; here 0 and 1 in both twins, so that the case holds the answer's bug alone"""
    x, y = _binary_rows()
    return Learner(tensor_dls(x, y, bs=64), _SeqNet(16, act=nn.Sigmoid() if fixed else nn.Softmax(dim=-1)),
                   loss_func=_keras_bce_2d, opt_func=torch_opt(torch.optim.Adam))

def _multilabel(n=2400, n_features=40, n_classes=11, seed=0):
    "scikit-learn's `make_multilabel_classification`: standardised features and multi-hot labels (about 3 per sample)"
    from sklearn.datasets import make_multilabel_classification
    x, y = make_multilabel_classification(n, n_features=n_features, n_classes=n_classes, n_labels=3, random_state=seed)
    x = torch.tensor(x, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0), torch.tensor(y, dtype=torch.float32)

@case("https://stackoverflow.com/questions/44164749",
      "multi-label targets (several 1s per row) are trained under a softmax and `categorical_crossentropy`: the probabilities sum to 1",
      {'multi_hot_softmax'}, epochs=10, lr=0.01)
def multilabel_softmax_categorical(fixed):
    """'How does Keras handle multilabel classification?': `y` from `MultiLabelBinarizer` (11 classes, several true per row)
    into `Dense(5000, relu)`, `Dense(600, relu)` (dropout 0.1 after each), `Dense(11, softmax)`, `categorical_crossentropy`,
    SGD at 0.01 with Nesterov momentum 0.9; the accepted answer: 'Don't use softmax. Use sigmoid for activation of your output
    layer. Use binary_crossentropy'. Layers of 256 and 64 here, batches of 64 (not 2,000), on scikit-learn's synthetic
    multi-label data"""
    x, y = _multilabel()
    model = _keras_init(nn.Sequential(nn.Linear(40, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 64), nn.ReLU(),
                                      nn.Dropout(0.1), nn.Linear(64, 11), nn.Sigmoid() if fixed else nn.Softmax(dim=1)))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=keras_bce if fixed else _keras_categorical_ce,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, nesterov=True))

def _digit_pairs(n=2400, seed=0):
    "Two digits side by side `(n, 1, 8, 16)` (0..1), and the multi-hot set of the classes they show (one or two 1s)"
    x, y = digits_raw()
    g = _gen(seed)
    i, j = torch.randint(0, len(x), (n,), generator=g), torch.randint(0, len(x), (n,), generator=g)
    img = torch.cat([x[i].view(-1, 8, 8), x[j].view(-1, 8, 8)], 2).unsqueeze(1) / 16
    return img, (F.one_hot(y[i], 10) | F.one_hot(y[j], 10)).float()

@case("https://stackoverflow.com/questions/41589126",
      "a CNN for images holding several digits keeps MNIST's 10-way softmax and `categorical_crossentropy` for multi-hot targets",
      {'multi_hot_softmax'}, epochs=4, lr=1e-3)
def multilabel_cnn_softmax(fixed):
    """'I have CNN which tries to predict numbers from MNIST ... It has 10 outputs, which form softmax layer ... I have a task
    where I need to classify some objects that can fall in several categories'; the accepted answer: 'replace the softmax layer
    with a sigmoid layer and use binary_crossentropy as your cost function'. A small Keras CNN on pairs of digits side by side,
    their classes as multi-hot targets, Adam"""
    x, y = _digit_pairs()
    model = _keras_init(nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 2 * 4, 128), nn.ReLU(),
                                      nn.Linear(128, 10), nn.Sigmoid() if fixed else nn.Softmax(dim=1)))
    return Learner(tensor_dls(x, y, bs=64), model, loss_func=keras_bce if fixed else _keras_categorical_ce,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://stackoverflow.com/questions/73462535",
      "an MNIST MLP ends in a softmax and trains under mean squared error against one-hot labels: SGD needs a learning rate above 1",
      {'loss_for_classes'}, epochs=20, lr=0.1)
def mse_on_softmax_needs_huge_lr(fixed):
    """`Dense(128, sigmoid)`, `Dense(10, softmax)`, `loss='mean_squared_error'` on one-hot labels, SGD, the first 1,000 MNIST
    images: 'for my model to converge the learning rate needs to be far higher, at least larger than 1 ... When I use a learning
    rate of around 0.001 the loss changes incredibly slowly'; the answer: the softmax represents a categorical distribution
    'but the loss you're using is typically used for optimizing Gaussian or regression outputs', use a cross-entropy. 1,000
    digits scaled to [0, 1], SGD at 0.1 in both twins (an ordinary rate, not the report's 5), batches of 100 (not 1,000)"""
    x, y = digits_raw()
    x, y = x[:1000] / 16, F.one_hot(y[:1000], 10).float()
    model = _keras_init(nn.Sequential(nn.Linear(64, 128), nn.Sigmoid(), nn.Linear(128, 10), nn.Softmax(dim=1)))
    return Learner(tensor_dls(x, y, bs=100), model, loss_func=_keras_categorical_ce if fixed else nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.SGD))

def _scaled_sums(n=2000, seed=0):
    "Two features (one of them up to 1,000, as in the report's patterns) and a target up to about 1,000"
    g = _gen(seed)
    x = torch.stack([1000 * torch.rand(n, generator=g), torch.rand(n, generator=g)], 1)
    return x, (0.6 * x[:, :1] + 400 * x[:, 1:] ** 2)

@case("https://stackoverflow.com/questions/9048031",
      "a regression network keeps a sigmoid output unit while the targets run into the thousands: the output cannot pass 1",
      {'target_range', 'output_activation'}, layer='3', epochs=5, lr=0.1)
def sigmoid_output_for_targets_in_thousands(fixed):
    """'The output layer of my neural network (3 layered) is using sigmoid as activation which outputs only in range [0-1].
    However, if I want to train it for outputs that are beyond [0-1], say in thousands, what should I do?'; the accepted
    answer: for regression 'there is no need to apply additional functions on the output, and you can just take the raw
    linear combination output ... also be careful ... to scale the input features'. A 2-16-1 network with a sigmoid hidden
    layer on targets up to ~1,000, MSE, Adam at 0.1 (the report's own backpropagation was plain SGD); the twin has a linear output
    and its inputs scaled, as the answer says"""
    x, y = _scaled_sums()
    if fixed: x = (x - x.mean(0)) / x.std(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Sigmoid(), nn.Linear(16, 1), *([] if fixed else [nn.Sigmoid()]))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))


# ---- unscaled inputs and targets ----
@case("https://stats.stackexchange.com/questions/372762",
      "the TensorFlow basic-classification MLP is trained on pixels of 0..255, not divided by 255: accuracy 10% where 85% is expected",
      {'input_scale'}, epochs=5, lr=1e-3)
def mlp_on_raw_pixels(fixed):
    """'We scale these values to a range of 0 to 1 before feeding to the neural network model ... My question is why do we need
    to normalize in this case? ... with normalization, I get an accuracy of over 85%, whereas no normalization, my accuracy
    falls to 10%'; the answers: normalisation (the tutorial's `/ 255`) is what lets it learn. The tutorial's `Flatten`,
    `Dense(128, relu)`, `Dense(10, softmax)`, Adam, `sparse_categorical_crossentropy`, 5 epochs, on the digits as bytes 0..255"""
    x, y = digits_raw()
    x = (x * 255 / 16).round()
    model = _keras_init(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(dim=1)))
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=32), model, loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://stackoverflow.com/questions/48284427",
      "a LeNet-like Keras CNN is trained on MNIST pixels of 0..255 without `X_train /= 255`: lower accuracy in the same epochs",
      {'input_scale'}, epochs=4, lr=1e-3)
def lenet_on_raw_pixels(fixed):
    """'I have performed a test without this normalization and I have seen that the performance (accuracy) of the network has
    decreased (keeping the same number of epochs). Why has this happened?'; the answers: unnormalised inputs make the steps
    badly scaled, normalise (`X_train /= 255`). The report's `Conv2D(20, 5)`, pooling, `Conv2D(50, 5)`, pooling, `Dense(500)`,
    `Dense(10, softmax)`, Adam, batches of 128, 20% held out, on the digits as 8×8 bytes"""
    x, y = digits_raw()
    x = (x * 255 / 16).round().view(-1, 1, 8, 8)
    model = _keras_init(nn.Sequential(nn.Conv2d(1, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5, padding=2),
                                      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(50 * 2 * 2, 500), nn.ReLU(),
                                      nn.Linear(500, 10), nn.Softmax(dim=1)))
    return Learner(tensor_dls(x / 255 if fixed else x, y, bs=128), model, loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://stackoverflow.com/questions/52800582",
      "a Keras regressor of y = x**4 gets x in [-100, 100] and targets up to 1e8 unscaled: its sigmoid layer saturates, it fails to fit",
      {'input_scale', 'target_scale', 'input_saturation'}, epochs=5, lr=1e-3)
def quartic_regression_unscaled(fixed):
    """'Why do I fail to predict y=x**4 with keras? (y=x**3 works)'; the answer: 'your input and output variables have too large
    values and hence are not compatible with the (initial) weights of the network': the first `Dense` layer's sigmoid
    saturates, and the last layer's Glorot weights would need countless steps to reach outputs of 1e8; scale inputs and
    outputs. `Dense(10, sigmoid)`, `Dense(10, elu)`, `Dense(1)`, MSE, Adam; the twin divides x by 100 and y by 1e8"""
    g = _gen(0)
    x = 200 * torch.rand(2000, 1, generator=g) - 100
    y = x ** 4
    if fixed: x, y = x / 100, y / 1e8
    model = _keras_init(nn.Sequential(nn.Linear(1, 10), nn.Sigmoid(), nn.Linear(10, 10), nn.ELU(), nn.Linear(10, 1)))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.Adam))

@case("https://stats.stackexchange.com/questions/418955",
      "two stacked linear units fit y = x**2 + 3 (targets up to ~9,800) by SGD on standardised x, the target unscaled: the loss diverges",
      {'target_scale'}, epochs=20, lr=0.01)
def linear_stack_unscaled_target(fixed):
    """'Why is this toy example so difficult for neural net to learn?' (two `Dense(1)` without activation, `sgd`, `mse`, x
    standardised, y = x**2 + 3 for x in 0..99); the author's update: 'this particular behavior is caused by not scaled target
    variable ... the learning occurs only with very small learning rate'. Keras's SGD at 0.01, batches of 32 of the 100 points
    (repeated 10 times, so an epoch has a few steps); the twin standardises the target as the inputs"""
    x = torch.arange(100.).repeat(10).unsqueeze(1)
    y = x ** 2 + 3
    x = (x - x.mean()) / x.std()
    if fixed: y = (y - y.mean()) / y.std()
    model = _keras_init(nn.Sequential(nn.Linear(1, 1), nn.Linear(1, 1)))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.MSELoss(), opt_func=torch_opt(torch.optim.SGD))

