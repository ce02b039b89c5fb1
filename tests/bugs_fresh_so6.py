"""Bug zoo, a sixth fresh family from Stack Overflow (issue 58): questions about a Keras network that trains badly
(accuracy that does not improve, a loss with regular spikes), each with the answer that named the bug. See `bugzoo.py`.
Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever run under
the tool. Cases were chosen for how common the bug is (a three-class problem squeezed into one sigmoid unit under a
binary cross-entropy, a loss normalised by the batch size twice so that the small last batch of an epoch takes an
outsized step), never for whether the tool catches it. Each bug was checked with plain fastai before any run under the
tool: it shows its thread's symptom, and its fixed twin trains. `loss_summed` is taken broadly, as in the families
before, for a loss whose scale depends on the batch size (here it shrinks with it).

The search was asked for four cases and found two it could port. The stored copy of Stack Overflow holds few such
threads: most pages found were generated checklists with no thread behind them, copies of questions without their
answers (so no fix to port), or threads other families already cite (Data Science Stack Exchange 38604, Cross Validated
481881 and 284189, Stack Overflow 52800582, the `fixeme.com` copy of a diverging one-unit regression). Left out: threads
whose answer could not be read (a hand-written softmax normalised over the whole batch, Cross Validated 550353; an Iris
network that predicts a third for every class, Data Science Stack Exchange 18075; a threshold classifier ending in a
ReLU under `binary_crossentropy`, read at geeksmental.com), a bug already in the zoo three times (a softmax over one
output unit), and Stack Overflow 33712178 ('Tensorflow NaN bug?', `y_*tf.log(y_conv)` turning NaN once a probability
underflows to 0), whose port did not show the symptom: after hundreds of batches on the digits the smallest probability
was still about 1e-12, far above float32's underflow near 1e-45."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _keras_init, _blobs, _dls


# ---- the output and the loss: three classes, one sigmoid unit, a binary cross-entropy ----
def _three_digits():
    "The digits 0, 1 and 2 as 8×8 images scaled to [0, 1] (a generator's `rescale`), and their labels 0, 1, 2"
    x, y = digits_raw()
    keep = y < 3
    return (x[keep] / 16).view(-1, 1, 8, 8), y[keep]

def _keras_cnn(n_out):
    """The answer's CNN, scaled to 8×8 images: three 3×3 convolutions (32, 32, 64) each with a ReLU and a 2×2 pooling, a
    dense layer of 64 with dropout 0.5, and `n_out` outputs; Keras's initialisation"""
    def block(i, o): return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    return _keras_init(nn.Sequential(*block(1, 32), *block(32, 32), *block(32, 64), nn.Flatten(),
                                     nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, n_out)))

class _KerasHead(nn.Module):
    "The CNN's last activation: a sigmoid on one unit (the question) or a softmax on three (the answer)"
    def __init__(self, n_out):
        super().__init__()
        self.body = _keras_cnn(n_out)
        self.act = nn.Sigmoid() if n_out == 1 else nn.Softmax(dim=1)
    def forward(self, x): return self.act(self.body(x))

def _binary_crossentropy(p, y):
    "Keras's `binary_crossentropy` on the sigmoid unit against `class_mode='binary'` labels: class indices as floats"
    return keras_bce(p.squeeze(1), y.float())

def _keras_accuracy(p, y):
    "Keras's `accuracy` as it reads each twin: `binary_accuracy` (round(p) == y) for one unit, the argmax for three"
    pred = p.squeeze(1).round() if p.shape[1] == 1 else p.argmax(1).float()
    return (pred == y.float()).float().mean()

@case("https://newbedev.com/cnn-with-keras-accuracy-not-improving",
      "a CNN for three image classes ends in one sigmoid unit under `binary_crossentropy` and its generators give the "
      "labels 0, 1 and 2: the accuracy does not improve",
      {'output_classes', 'target_range'}, epochs=6, lr=1e-3)
def three_classes_one_sigmoid_unit(fixed):
    """'CNN with keras, accuracy not improving' (a Stack Overflow question, read in a copy at newbedev.com, also at
    newbe.dev and in translations at python.19633.com, that keeps the title and the answers but not the question's text,
    its number or whether an answer was accepted). The answer: 'The issue is caused by a mis-match between the number of
    output classes (three) and your choice of final layer activation (sigmoid) and loss-function (binary cross
    entropy)'; the sigmoid 'is designed for binary (two class) problems only'; the fix: `Dense(3)` then a softmax,
    `categorical_crossentropy`, and `class_mode='categorical'` in the data generators, and a second answer: 'Minor
    correction: model.add(Dense(1)) Should be: model.add(Dense(3))'. What the question's code was is read from the
    answers: one output unit, a sigmoid, `binary_crossentropy`, and generators left in a class mode that gives one
    number per image (`class_mode='binary'` gives the class index, 0, 1 or 2, as a float). Against a target of 2 the
    binary cross-entropy has no minimum in [0, 1]: it pushes the unit towards 1 for both classes 1 and 2, and class 2 is
    never counted right. Ported: the digits 0, 1 and 2 as 8×8 images scaled to [0, 1], the answer's CNN scaled down
    (three convolutions of 32, 32 and 64 with pooling, dense 64, dropout 0.5) with Keras's initialisation, RMSprop at
    Keras's default 1e-3 (the answer's `optimizer='rmsprop'`), batches of 32; the bug ends in `Dense(1)` and a sigmoid
    under Keras's clipped `binary_crossentropy` on the class indices, the twin in `Dense(3)` and a softmax under Keras's
    categorical cross-entropy. Measured (6 epochs, plain fastai): the batch losses fall from 0.69 through 0 to -4 to -9
    (a target of 2 makes the clipped binary cross-entropy negative and unbounded but for the clip), the validation loss
    from -0.07 to -4.6; Keras's accuracy sits at 0.36 for three epochs (the unit answers 1 for every image: the share
    of class 1), then at 0.71 and moves no further: the unit has learnt to tell class 0 from the rest, and class 2 (29%
    of the validation images, pushed towards 1 with class 1) is never right. The twin's loss falls
    from 1.12 to 0.08 (loss ratio 0.075), its validation accuracy from 0.84 to 1.0"""
    x, y = _three_digits()
    n_out = 3 if fixed else 1
    return Learner(tensor_dls(x, y, bs=32), _KerasHead(n_out), loss_func=keras_ce if fixed else _binary_crossentropy,
                   metrics=_keras_accuracy, opt_func=torch_opt(torch.optim.RMSprop, alpha=0.9, eps=1e-7))


# ---- the loss: normalised by the batch size twice, so that a small last batch takes an outsized step ----
def _box_masks(n=601, size=16):
    "Noisy 16×16 images with 1-3 bright rectangles (`bugs_data._blobs`) and the mask of the cells they cover"
    x, m = _blobs(n=n, size=size)
    return x, (m > 0).float().unsqueeze(1)

def _dense_head():
    "A small fully convolutional detector head: two 3×3 convolutions and a 1×1 one, a logit per cell"
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 1, 1))

def _per_positive_bce(out, t):
    "SSD's normalisation: the binary cross-entropy summed over the cells, divided by the batch's number of positives"
    return F.binary_cross_entropy_with_logits(out, t, reduction='sum') / t.sum().clamp(min=1)

def _keras_averaged(out, t):
    "What Keras trained on: SSD's loss (divided by a count that grows with the batch) divided by the batch size again"
    return _per_positive_bce(out, t) / len(t)

@case("https://stackoverflow.com/questions/47824598",
      "the detector's loss divides by the number of positive boxes, which grows with the batch, and Keras divides "
      "it by the batch size again: the small last batch of each epoch takes a step many times too large and the loss "
      "spikes",
      {'loss_summed', 'last_batch_one'}, epochs=8, lr=1e-2)
def loss_normalised_twice_last_batch_spikes(fixed):
    """'Why does my training loss have regular spikes?' (the question read at stackoverflow.com, the answer in copies at
    newbedev.com and newbe.dev, which do not say whether it was accepted; it is the asker's own): training the SSD
    detector of the ssd_keras repository, the loss 'is decreasing overall, but it shows sharp regular spikes', which
    'occur precisely once every 1390 training steps, which is exactly the number of training steps for one full pass
    over my training dataset', though the generator shuffles before each pass; the only change from the repository's
    notebook was 'the batch size from 32 to 16'. The asker's answer: 'Make sure your loss magnitude is independent of
    your mini-batch size': SSD's loss averages 'by the number of ground truth bounding boxes in the batch' and Keras
    then divides by the batch size again, so the loss 'becomes inversely proportional to the batch size'; the dataset is
    not a multiple of the batch size, so 'the very last mini-batch of an epoch' is smaller, and with an optimiser with
    momentum its 'messed up gradient continues influencing the gradients of a few subsequent training steps'; the fix:
    'multiplying the loss by the batch size'. Ported: noisy 16×16 images with 1-3 bright rectangles, a small fully
    convolutional head giving a logit per cell, the binary cross-entropy summed over the cells and divided by the number
    of positive cells (SSD's normalisation); the bug divides that by the batch size again, the twin does not (the
    answer's multiplication). Batches of 16 (the question's) over 481 training images, so that each epoch ends in a
    batch of one image (any remainder well under 16 does the same, less strongly; with 480 images both twins train
    identically, Adam being blind to a constant scale); Adam (an optimiser with momentum, as the answer has it) at 1e-2:
    at 1e-3 the port, a far smaller problem, shows no spikes. Training goes on; only the steps after each small batch
    are wrong. Measured (8 epochs of 31 batches, each batch's loss put on the twin's scale): the first batches of epochs
    2-8 rise to 1.1, 2.9, 2.2, 2.3, 1.6, 3.9 and 8.6 times the loss of the batches just before (the twin's: 0.9 to 2.1),
    and the validation loss (on the twin's scale) swings between 0.056 and 0.108 to end at 0.067; the twin's batch
    losses fall from 6.9 to 0.04 (loss ratio 0.11) and its validation loss steadily from 0.090 to 0.041"""
    x, t = _box_masks()
    return Learner(_dls(x[:481], t[:481], x[481:], t[481:], bs=16, drop_last=False), _dense_head(),
                   loss_func=_per_positive_bce if fixed else _keras_averaged, metrics=_per_positive_bce,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7))
