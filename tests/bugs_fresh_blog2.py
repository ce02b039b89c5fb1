"""Bug zoo, a second family from written post-mortems (issue 45): blog posts in which the author tells of a training run
of their own that misbehaved, what they found, and the change that made it train (an engineering blog, a personal blog,
a practitioner's blog on Keras, a data-science newsletter). See `bugzoo.py`. Each case cites its post; its truth
(`kinds`, `layer`) was written before the case was ever run under the tool. Cases were chosen for how common the bug is
(frozen BatchNorm layers that normalise with the batch's statistics in training and with stale stored ones in
evaluation, a softmax layer feeding a clipped cross-entropy, a hand-written `log(1 - softmax)` that meets a probability
of exactly 1, a training set stored label by label and fed unshuffled), never for whether the tool catches it. Many
stored pages are generic checklists or lessons with no bug of the author's own; none of those is used, so fewer cases
than asked for could be sourced. Each bug was checked with plain fastai before any run under the tool: it shows its
post's symptom, and its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _digit_images, _split, _dls


# ---- modes: frozen BatchNorm layers in transfer learning ----
class _FrozenBodyNet(nn.Module):
    """A 'pretrained' convolutional body (two convolutions with BatchNorm, frozen) and a new linear head. With `bn_eval`
    the frozen BatchNorms stay in inference mode while the rest trains (the post's patch); without it they follow
    `model.train()` and normalise each training batch by its own statistics"""
    def __init__(self, bn_eval):
        super().__init__()
        self.bn_eval = bn_eval
        self.body = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Linear(256, 10)
    def forward(self, x): return self.head(self.body(x))
    def train(self, mode=True):
        super().train(mode)
        if self.bn_eval:
            for m in self.body.modules():
                if isinstance(m, nn.BatchNorm2d): m.eval()
        return self

def _pretrain_stats(model, source):
    "The body's BatchNorm moving averages as pretraining on another domain (`source`) left them, then frozen"
    bns = [m for m in model.body.modules() if isinstance(m, nn.BatchNorm2d)]
    for b in bns: b.momentum = None; b.reset_running_stats()   # a cumulative average over the source
    model.body.train()
    with torch.no_grad(): model.body(source)
    for b in bns: b.momentum = 0.   # Keras's frozen layer: its moving averages no longer change
    for p in model.body.parameters(): p.requires_grad_(False)
    return model

@case("http://blog.datumbox.com/the-batch-normalization-layer-of-keras-is-broken/",
      "frozen BatchNorm layers of a pretrained body normalise training batches by their own statistics but validation "
      "by the stored moving averages of the pretraining data: the head is trained on features evaluation never gives",
      {'eval_stats_stale'}, epochs=6, lr=1e-2)
def frozen_batchnorm_batch_stats_in_training(fixed):
    """'The Batch Normalization layer of Keras is broken': 'quite many times I've been bitten by the odd behavior of the
    Batch Normalization layer'; the post builds 'a case for why Keras' BatchNormalization layer does not play nice with
    Transfer Learning': a frozen (`trainable=False`) BatchNorm of a pretrained network still normalises each training
    batch by its own mean and variance, while inference uses the moving averages learnt on the pretraining data, so the
    layers trained on top see different features in training and in evaluation, and the validation score is far below
    what training shows. The author's patch (his pull request, not merged into Keras) makes a frozen BatchNorm use its
    moving averages in training too. Ported: a small convolutional body (two convolutions with BatchNorm, random weights
    standing in for pretrained ones, frozen) whose moving averages were accumulated on another domain (the digits
    inverted, 1 - x) and then frozen, a new linear head, the digits as 8×8 images in [0, 1], cross-entropy, Adam at
    1e-2; the twin keeps the frozen BatchNorms in inference mode (the post's patch). Every trainable layer is healthy:
    only the frozen BatchNorms switch statistics between training and evaluation. Measured: the training loss falls from
    1.43 to 0.26 over 6 epochs (batch losses to 0.11 of their first) while the validation loss stays at 1.5 to 1.15 and
    the accuracy at 0.51 to 0.66; the twin trains alike (0.12) and validates at 0.96 to 0.23, accuracy 0.86 to 0.96"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y)
    model = _pretrain_stats(_FrozenBodyNet(bn_eval=fixed), 1 - x[:500])
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the output and the loss: a softmax layer and Keras's clipped cross-entropy ----
@case("https://epcsirmaz.blogspot.com/2019/",
      "a softmax layer ends the model and Keras's `categorical_crossentropy` (probabilities clipped to [1e-7, "
      "1 - 1e-7]) is the loss: once the softmax saturates on a wrong class the clipped loss has no gradient and "
      "accuracy stays at chance",
      {'output_activation', 'saturated'}, epochs=5, lr=0.1)
def softmax_layer_clipped_crossentropy_stuck(fixed):
    """A post on a classifier whose accuracy fell to '1/N where N was the number of classes. In other words, it became
    no better than a random guess, and the network was stuck in this state'; of the remedies tried, 'the solution that
    ultimately helped was somewhat surprising': 'I used TensorFlow and Keras, and added a softmax layer from Keras as
    the last layer in my model, and used Keras's categorical_crossentropy as the loss function. It turned out that this
    arrangement can be quite unstable'; switching to `tf.nn.softmax_cross_entropy_with_logits_v2` and removing the
    softmax layer, 'the problem largely went away'. Keras computes that loss on the probabilities, clipped to [1e-7, 1 -
    1e-7] before the log: where the softmax has saturated on a wrong class the clip is active and no gradient comes
    back. Ported: the digits' pixels in [0, 1], an MLP (64-128-128-10) with Keras's initialisation, a softmax layer and
    Keras's clipped cross-entropy, Adam (Keras's epsilon) at 0.1, a rate at which the softmax saturates within the first
    batches; the twin drops the softmax layer and takes the cross-entropy on the logits. At 0.05 both train (the bug's
    training loss falls to 0.15 of its first). Measured: the bug's loss jumps from 2.27 to 12.7 in the first epoch and
    stays at 12.9 (0.92 of its first), validation loss 13.29 and accuracy 0.176 identical in all 5 epochs: one class for
    every digit; the twin's falls to 0.40 of its first (validation 1.32 to 0.90, accuracy 0.54 to 0.60)"""
    x, y = digits_raw()
    layers = [nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)]
    model = nn.Sequential(*layers, *([] if fixed else [nn.Softmax(dim=1)]))
    for m in model.modules():   # Keras's initialisation: Glorot-uniform kernels, zero biases
        if isinstance(m, nn.Linear): nn.init.xavier_uniform_(m.weight); nn.init.zeros_(m.bias)
    return Learner(tensor_dls(x / 16, y, bs=32), model, loss_func=nn.CrossEntropyLoss() if fixed else keras_ce,
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam, eps=1e-7))


# ---- numerics: log(1 - softmax) ----
_STOP = 0   # the class that the penalty keeps away from the examples of every other class (the post's EOS token)

def _stop_penalised_ce(stable, alpha=1.):
    """The post's loss, on a classifier: cross-entropy plus `alpha` times `-log(1 - softmax(z)[stop])` on the examples
    whose class is not `stop`; computed as written (`log(1 - softmax)`), or (`stable`) from the logits by log-sum-exp"""
    def loss(z, y):
        if stable: keep = torch.logsumexp(torch.cat([z[:, :_STOP], z[:, _STOP + 1:]], 1), 1) - torch.logsumexp(z, 1)
        else: keep = torch.log(1 - F.softmax(z, 1)[:, _STOP])
        return F.cross_entropy(z, y) + alpha * (-keep[y != _STOP]).mean()
    return loss

@case("https://foreai.co/blog/nans-out-of-nowhere-the-trick-that-saved-my-training-run",
      "a custom penalty `-log(1 - softmax(z)[eos])` is computed from the softmax: once a probability rounds to "
      "exactly 1 the log is of 0, the loss infinite and the gradients NaN",
      {'nonfinite_loss', 'nonfinite'}, epochs=4, lr=3e-2)
def log_one_minus_softmax_nan(fixed):
    """'NaNs Out of Nowhere? The Trick That Saved My Training Run': the author trained a language model with
    cross-entropy plus penalties on the end-of-sequence token, one that 'punishes the model for spitting out an EOS for
    a "positive" example' of the form `log(1 - softmax(...))` of the EOS logit, written first as a 'simple PyTorch
    implementation' on the softmax; training produced NaNs 'out of nowhere', a 'sneaky numerical instability issue with
    a custom loss function' that 'math tricks helped to solve' (the stored copy shows the problem, not the rewritten
    code: the port's fix computes the same penalty from the logits in a stable form).
    In float32 a softmax probability rounds to exactly 1 once its logit leads the others by about 17, and `log(1 - 1)`
    is -inf. Ported to a classifier: the digits' pixels in [0, 1], an MLP (64-128-128-10), cross-entropy plus the
    penalty `-log(1 - p_0)` on every example not of class 0 (class 0 standing for the EOS token), Adam at 3e-2; the twin
    computes the same penalty as `logsumexp(z without class 0) - logsumexp(z)`, which has no log of 0. At 1e-2 neither
    meets a NaN in 4 epochs. Measured: both are identical for the first epoch (training loss 0.61, validation accuracy
    0.89); the bug's loss is infinite or NaN from the 48th batch on (129 of 176 batches), validation accuracy 0.106 from
    the second epoch; the twin never meets a non-finite value and its loss falls to 0.07 of its first (validation
    accuracy 0.82 to 0.93)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(tensor_dls(x / 16, y, bs=32), model, loss_func=_stop_penalised_ce(stable=fixed), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- data: a training set in label order ----
@case("https://dailydoseofds.beehiiv.com/p/why-is-it-important-to-shuffle-your",
      "the training data is stored ordered by label and fed without a shuffle: each stretch of mini-batches holds one "
      "class, and the network fails to converge",
      {'unshuffled_batches'}, epochs=8, lr=1e-2)
def label_ordered_data_not_shuffled(fixed):
    """'Why Is It Important To Shuffle Your Dataset Before Training An ML Model': 'If your data is ordered by labels,
    this could negatively impact the model's convergence and accuracy. This is a mistake that can typically go
    unnoticed'; two networks with the same initial weights and settings, one fed label-ordered data, one shuffled: 'the
    model receiving a label-ordered dataset fails to converge'; 'P.S. This was a mistake that I once made a few years
    back' (the fix: shuffle, and reshuffle each epoch). No layer misbehaves in a way its statistics show: each batch
    holds one class and the network follows it. Ported: the digits' pixels in [0, 1] sorted by label, an MLP (64-64-10),
    cross-entropy, Adam at 1e-2, mini-batches of 64 in stored order; the twin shuffles every epoch. Measured: the bug's
    epoch training losses stay at 2.68 to 2.01 for 8 epochs (its batch losses at 0.59 of their first: each class is
    fitted in its stretch, then undone by the next) and the validation accuracy creeps from 0.11 to 0.47; the twin's
    loss falls to 0.05 of its first, validation accuracy 0.88 to 0.98"""
    x, y = digits_raw()
    xt, yt, xv, yv = _split(x / 16, y, n_valid=360)
    order = torch.argsort(yt, stable=True)   # ordered by label
    xt, yt = xt[order], yt[order]
    train = DataLoader([(xt[i], yt[i]) for i in range(len(xt))], bs=64, shuffle=fixed, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(xv[i], yv[i]) for i in range(len(xv))], bs=64))
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return Learner(dls, model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))
