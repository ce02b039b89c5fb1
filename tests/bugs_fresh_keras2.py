"""Bug zoo, a Keras family (issue 45): Keras users whose model trained but did not learn, from keras-team/keras GitHub
threads no other family cites, each with the fix its thread accepted. See `bugzoo.py`. Each case cites its thread; its
truth (`kinds`, `layer`) was written and committed before the case was ever run under the tool. Cases were chosen for
how common the bug is (one-hot targets from `flow_from_directory`'s default `class_mode='categorical'` given to a single
sigmoid unit; `categorical_crossentropy` on a single sigmoid unit), never for whether the tool catches it. Losses are
computed as Keras computes them (`keras_bce`: probabilities clipped to [1e-7, 1 - 1e-7], then the log; the `(n, 1)`
output broadcast against the targets as Keras's loss broadcasts it; `categorical_crossentropy` normalised over the last
axis first). One more thread was ported and left out: keras#4784 (a `Dense(1, activation='relu')` output under
`binary_crossentropy`, fixed by a sigmoid) showed its symptom (the loss fixed at the clip, 16.1 times the positives'
share, 4.4 at accuracy 0.73, as reported) only at learning rates where its twin, under the report's `init='uniform'`
five-layer stack, did not train (ratio 0.96), so no honest pair could be kept. Each bug kept was checked with plain
fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from bugzoo import *
from bugs_data import _digit_images, _keras_init
from bugs_fresh4 import _keras_categorical_ce
from bugs_fresh11 import _cancer


# ---- the targets ----
def _one_unit_accuracy(p, y):
    "Accuracy of one sigmoid unit against the class, whether the target is its index `(n, 1)` or one-hot `(n, 2)`"
    t = y.argmax(1, keepdim=True).float() if y.shape[1] == 2 else y
    return ((p > 0.5).float() == t).float().mean()

def _cnn_one_unit():
    "A small Keras-style binary CNN for 8×8 images: two 3×3 convolutions with ReLU, pooling, `Dense(1, sigmoid)`"
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1), nn.Sigmoid())

@case("https://github.com/keras-team/keras/issues/13006",
      "`flow_from_directory` keeps its default `class_mode='categorical'`: one-hot `(n, 2)` targets meet one sigmoid "
      "unit, the loss broadcasts and is least at 0.5",
      {'target_shape'}, epochs=20, lr=1e-3)
def categorical_class_mode_one_sigmoid(fixed):
    """'Keras training and validation accuracy always converges to 0.5': a binary image classifier ending in one
    sigmoid unit under `binary_crossentropy`, fed by `ImageDataGenerator.flow_from_directory`. The answer the thread
    thanked ('changing the class_mode to binary helped me. The default seems to be categorical', 'You are my
    lifesaver!'): 'be sure to add class_mode='binary' to gen_train.flow_from_directory'. With the default the targets
    are one-hot pairs; Keras's loss broadcasts the `(n, 1)` output against them, so every image asks for 1 and 0 at once
    and the loss is least when every output is 0.5. Ported to two classes of the digits (3 and 8, pixels rescaled to
    0..1 as `rescale=1./255` does), a small CNN ending in `Linear(32, 1)` and a sigmoid, `keras_bce` (which broadcasts
    `(n, 1)` against `(n, 2)` as Keras's loss does), Adam at 1e-3 (Keras's default), 20 epochs (160 batches). The
    twin's targets are the class index, `(n, 1)`. No per-layer statistic sees the bug: the network is healthy and
    learns exactly what the loss asks, an output of 0.5; only the targets' shape against the output's gives it away.
    Measured: the loss sits at 0.6931 (ln 2) from the first batch to the last (ratio 1.00; validation loss 0.6931,
    accuracy 0.44, below the larger class's share); the twin's falls from 0.694 to 0.50 (ratio 0.77; validation loss
    0.51, accuracy 0.86)"""
    x, y = _digit_images()
    keep = (y == 3) | (y == 8)
    x, c = x[keep], (y[keep] == 8).long()
    t = c.float().unsqueeze(1) if fixed else F.one_hot(c, 2).float()
    return Learner(tensor_dls(x, t, bs=32), _cnn_one_unit(), loss_func=keras_bce, metrics=_one_unit_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the loss ----
@case("https://github.com/keras-team/keras/issues/17029",
      "a binary classifier of one sigmoid unit is compiled with `categorical_crossentropy`: over one unit Keras's loss "
      "is a constant near 0, no gradient reaches the model",
      {'loss_for_classes', 'output_classes'}, epochs=10, lr=1e-3)
def categorical_ce_on_one_sigmoid_unit(fixed):
    """'Raise an error when use categorical_crossentropy for binary classification', a maintainer's issue (users report
    the same bug elsewhere, e.g. keras#14729, a breast-cancer classifier ending in `Dense(1, activation="sigmoid")`
    under `keras.losses.categorical_crossentropy`): 'it does not raise any error, but have all the losses equal to 0
    during training. It may confuse the user that the model has some problem, but actually it just because they
    accidentally used the wrong loss'; the fix (keras#17330, merged) warns 'Consider using binary crossentropy instead
    of categorical crossentropy if you have only 2 labels'. Keras's categorical cross-entropy divides the probabilities
    by their sum over the last axis, which over one unit is 1 whatever the input: the loss is -y log(1 - 1e-7) and every
    gradient is exactly 0. Ported to scikit-learn's breast-cancer data (the data of keras#14729), standardised, an MLP
    (30-16-16-1, ReLU, a sigmoid output) with Keras's Glorot-uniform initialiser, Adam at 1e-3 (Keras's default),
    batches of 32, 10 epochs; the loss is `_keras_categorical_ce`, as Keras computes it; the twin's is `keras_bce`.
    Measured: every batch's loss is about 1e-7 (y times -log(1 - 1e-7)), every gradient exactly 0 and no weight moves in
    140 steps (the ratio, 0.98, is the batches' share of positives); the validation accuracy stays at the untrained
    model's 0.76. The twin's loss falls from 0.60 to 0.07 (ratio 0.19; validation loss 0.13, accuracy 0.96)"""
    x, y = _cancer()
    model = _keras_init(nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1),
                                      nn.Sigmoid()))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=keras_bce if fixed else _keras_categorical_ce,
                   metrics=_one_unit_accuracy, opt_func=torch_opt(torch.optim.Adam))
