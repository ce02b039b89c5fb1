"""Bug zoo, a ninth fresh family from Stack Overflow (issue 62): questions tagged keras, tensorflow or pytorch about a
model that trains badly or reports figures far from what it does, each with the answer that named the bug. See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was
ever run under the tool. Cases were chosen for how common the bug is (a multi-class softmax trained under the binary
cross-entropy, whose accuracy Keras then reports as a binary one), never for whether the tool catches it. Each bug was
checked with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains.

The search found few Stack Overflow threads whose stored copies hold both the question and the answer: most hits were
generated checklists, tutorials, or mirrors that keep the question only or hide the thread's address; threads whose
bug the zoo already holds from another Stack Overflow thread (a `Dense(1)` softmax, 47241622) were left out. Hence one
case, not five."""
from bugzoo import *
from bugs_data import _dls, _split


# ---- the loss: a multi-class softmax under the binary cross-entropy, its accuracy read as a binary one ----
def _keras_binary_accuracy(p, y):
    "Keras's `binary_accuracy` (`metrics=['accuracy']` under `binary_crossentropy`): each output rounded at 0.5"
    return ((p > 0.5).float() == y).float().mean()

def _categorical_accuracy(p, y): return (p.argmax(1) == y.argmax(1)).float().mean()

def _keras_cce(p, y, eps=1e-7):
    "Keras's `categorical_crossentropy` on probabilities and one-hot targets (clipped, then the log)"
    return -(y * torch.log(p.clamp(eps, 1 - eps))).sum(1).mean()

@case("https://stackoverflow.com/questions/42081257",
      "a single-label classifier with a softmax over its classes is compiled with `binary_crossentropy` on one-hot "
      "labels: each output is scored as a separate yes/no, and the accuracy Keras reports is that binary one",
      {'loss_for_classes'}, epochs=5, lr=1e-3)
def multiclass_softmax_under_binary_crossentropy(fixed):
    """'Why binary_crossentropy and categorical_crossentropy give different performances for the same problem?': a CNN
    categorises text by topic, a softmax over the topics, one-hot labels from `to_categorical`; 'When I use binary
    cross-entropy I get ~80% accuracy, with categorical cross-entropy I get ~50% accuracy ... It's a multiclass
    problem, doesn't that mean that I have to use categorical cross-entropy and that the results with binary
    cross-entropy are meaningless?' The comments answer 'If it is a multiclass problem, you have to use
    categorical_crossentropy' and, to 'Does that mean the ~80% accuracy from binary crossentropy is just a bogus
    number?', 'I think so': under `binary_crossentropy`, `metrics=['accuracy']` is the binary accuracy of every output
    taken apart, which with k classes is already 1 - 1/k for a model that puts every probability under 0.5. (The
    stored copy shows the question and its comments, not the answers below them.) The digits 0 to 4 standardised with
    Gaussian noise of 3 added to every pixel (5 classes, so the bogus floor is 0.80; the noise holds the true accuracy
    near the thread's 50%), an MLP (64-64-5) ending in a softmax, Adam at 1e-3, batches of 32; the bug trains under the
    binary cross-entropy and reports the binary accuracy, the twin under the categorical cross-entropy and reports the
    categorical accuracy. No layer misbehaves: the loss scores the wrong question and the metric hides it. Measured
    over 5 epochs (seed 0; seed 1 alike): the reported accuracy is 0.796, 0.797, 0.796, 0.808, 0.820 while the model
    picks the right class for 0.31 to 0.49 of the validation digits (batch losses at 0.62 of their first); the twin's
    categorical accuracy is 0.31 to 0.49 and its batch losses fall to 0.57 of their first"""
    x, y = digits_raw()
    keep = y < 5
    x, y = (x[keep] - x.mean()) / x.std(), y[keep]
    x = x + 3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    xt, yt, xv, yv = _split(x, F.one_hot(y, 5).float(), n_valid=180)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5), nn.Softmax(dim=1))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=_keras_cce if fixed else keras_bce,
                   metrics=_categorical_accuracy if fixed else _keras_binary_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
