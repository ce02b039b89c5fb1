"""Bug zoo, an eleventh GitHub family (issue 45): from the issues and pull requests of tutorial, book and course
repositories no other family cites (karpathy's nanochat, fastai's course22p2, Udacity's deep-learning). See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was
ever run under the tool. Cases were chosen for how common the bug is (a loss mask dropped in a rewrite, a
learning-rate multiplier written the wrong way round, a report that scores a stale global variable, one-hot labels
built from a column vector), never for whether the tool catches it. The stale report leaves every statistic of
training healthy (the loss and the validation are right; only the printed accuracy is wrong): its docstring says so.
Each bug was checked with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed
twin trains."""
import numpy as np
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _gen, _dls, _split


# ---- a mask: a chat model's loss over the user's tokens too ----
_BOS, _ASSISTANT = 0, 1   # the special tokens; content tokens are 2..vocab-1

def _chats(n=2000, vocab=40, topics=6, prompt=16, answer=6, seed=0):
    """Synthetic one-turn chats `[BOS, prompt…, ASSISTANT, answer…]`: the user's prompt draws 60% of its tokens from
    its topic's 6 tokens and the rest from every content token; the assistant's answer is its topic's fixed 6-token
    reply. Inputs are each row but its last token, targets each row but its first (`(n, 23)` both)"""
    g = _gen(seed)
    t = torch.randint(0, topics, (n,), generator=g)
    words = 2 + torch.stack([torch.randperm(vocab - 2, generator=g)[:6] for _ in range(topics)])   # each topic's tokens
    replies = 2 + torch.randint(0, vocab - 2, (topics, answer), generator=g)
    own = words[t[:, None], torch.randint(0, 6, (n, prompt), generator=g)]
    anyw = 2 + torch.randint(0, vocab - 2, (n, prompt), generator=g)
    p = torch.where(torch.rand(n, prompt, generator=g) < 0.6, own, anyw)
    rows = torch.cat([torch.full((n, 1), _BOS), p, torch.full((n, 1), _ASSISTANT), replies[t]], 1)
    return rows[:, :-1], rows[:, 1:].clone()

class _ChatLM(nn.Module):
    "A small causal language model: token embeddings, a GRU, a linear head over the vocabulary"
    def __init__(self, vocab=40, d=32, h=64):
        super().__init__()
        self.emb, self.rnn, self.head = nn.Embedding(vocab, d), nn.GRU(d, h, batch_first=True), nn.Linear(h, vocab)
    def forward(self, x): return self.head(self.rnn(self.emb(x))[0])

def _lm_loss(out, y):
    "nanochat's loss: the cross-entropy over every position whose target is not -1"
    return F.cross_entropy(out.flatten(0, 1), y.flatten(), ignore_index=-1)

def _answer_loss(out, y, answer=6):
    "The cross-entropy over the assistant's answer tokens alone (the last `answer` targets of every row)"
    return F.cross_entropy(out[:, -answer:].flatten(0, 1), y[:, -answer:].flatten())

def _answer_accuracy(out, y, answer=6):
    "The share of the assistant's answer tokens predicted right"
    return (out[:, -answer:].argmax(-1) == y[:, -answer:]).float().mean()

@case("https://github.com/karpathy/nanochat/pull/582",
      "the SFT dataloader discards the conversation's loss mask: the user's prompt tokens and the special tokens are trained on along with the assistant's answer",
      {'padding_in_loss'}, epochs=4, lr=3e-3)
def sft_loss_mask_dropped(fixed):
    """'Restore completion-only loss masking in SFT dataloader': when `chat_sft.py` was rewritten, 'the loss mask from
    tokenizer.render_conversation() was accidentally dropped' (`ids, _ = tokenizer.render_conversation(conversation)  #
    mask discarded`), which 'causes all tokens - user prompts, BOS, special tokens, tool outputs to contribute to the
    cross-entropy loss'; the fix carries the mask through the packing and sets the targets it excludes to -1 (merged;
    the PR measured val bpb 0.355 against 0.27 with the mask, the train loss ~0.78 either way). Synthetic one-turn chats
    (a 16-token prompt from one of 6 topics, the topic's fixed 6-token answer), a GRU language model, nanochat's
    cross-entropy with `ignore_index=-1`, Adam at 3e-3; the twin sets every target but the answer's to -1. The loss
    the bug trains is mostly the prompt's (17 of every 23 targets, only partly predictable), and the answer is learnt
    more slowly. Measured (seeds 0 and 1) over 4 epochs: the validation loss on the answer's tokens is 0.88 and 0.90
    after the first epoch and 0.076 and 0.077 after the fourth, against the twin's 0.38 and 0.37, then 0.034 and 0.032
    (answer accuracy 0.99 either way by the end); the bug's batch losses end at 0.66 and 0.67 of their first (2.28 and
    2.29, the prompt's entropy), the twin's at 0.011 and 0.008"""
    x, y = _chats()
    if fixed: y[:, :-6] = -1   # only the assistant's answer is trained on
    xt, yt, xv, yv = _split(x, y, n_valid=400)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _ChatLM(), loss_func=_lm_loss,
                   metrics=[_answer_loss, _answer_accuracy], opt_func=torch_opt(torch.optim.Adam))


# ---- a schedule: the learning rate ramps up where it should ramp down ----
class _ProgressLR(Callback):
    """nanochat's midtraining schedule: each batch the base rate is multiplied by `get_lr_multiplier(progress)`,
    `progress` going from 0 to 1 over the run. As the bug had it the multiplier is `progress` (with `final_lr_frac=0`):
    it ramps up from 0; as fixed, 1 for the first 80% of the run, then a linear ramp down to 0"""
    order = 60
    def __init__(self, backwards): self.backwards = backwards
    def before_fit(self): self.base, self.lrs = self.opt.hypers[-1]['lr'], []
    def before_batch(self):
        if not self.training: return
        p = self.train_iter / (self.n_epoch * self.n_iter)
        m = p * 1.0 + (1 - p) * 0.0 if self.backwards else (1 if p < 0.8 else 1 - (p - 0.8) / 0.2)
        self.opt.set_hyper('lr', self.base * m)
        self.lrs.append(self.base * m)

@case("https://github.com/karpathy/nanochat/issues/68",
      "the midtraining learning-rate multiplier is `progress` where it should be `1 - progress`: the rate ramps up from 0 over the run instead of down",
      {'lr_too_low', 'loss_stalled'}, epochs=4, lr=1e-2)
def midtraining_lr_ramps_up(fixed):
    """'midtraining learning rate is backwards (bad bug)': 'The variable `progress` increases from 0 to 1, while the
    learning rate multiplier should do the opposite ... instead of ramping down the LR I am ramping it up. Classic
    example in the wild of neural networks fail silently'; the author's fix (b8076dd): 'first 80% of training: no
    decay, then linearly ramp down to 0'. With the bug the first steps are taken at a rate near 0 and the last at the
    full rate, with no decay at the end. The same synthetic chats, the GRU language model trained on every token (as
    midtraining is), Adam at a base rate of 1e-2 multiplied per batch by the script's schedule; the twin uses the fixed
    one. Measured (seeds 0 and 1) over 4 epochs: the rate climbs from 0 and the first tenth of the batch losses stays
    at ln 40 (median 3.70 and 3.68, the twin's 3.02 and 3.06); the first epoch ends at a training loss of 3.50 and 3.49
    against the twin's 2.62 and 2.63, and the run ends at the full rate with a validation loss of 2.32 and 2.30 (on the
    answer's tokens 0.051 and 0.049) against the twin's annealed 2.26 and 2.24 (0.028 and 0.025). Both train (batch
    losses end at 0.61 and 0.62 of their first, the twin's at 0.74 and 0.72)"""
    x, y = _chats(seed=1)
    xt, yt, xv, yv = _split(x, y, n_valid=400)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _ChatLM(), loss_func=_lm_loss, metrics=[_answer_loss],
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_ProgressLR(backwards=not fixed)])


# ---- evaluation: a report that scores a stale global ----
class _StaleReport(Callback):
    """The notebook's `report(loss, preds, yb)` after each epoch: the accuracy of `preds` against the last batch's
    labels `yb`. As the bug had it, the loop names its predictions `pred`, so `preds` is the global left by an earlier
    cell (`xb,yb = x_train[:bs]; preds = model(xb)`: the untrained model on the first training rows); as fixed, the
    last batch's own predictions. The reported accuracies are kept in `values`"""
    order = 90
    def __init__(self, stale): self.stale, self.values = stale, []
    def before_fit(self):
        xb, _ = self.dls.train.one_batch()
        with torch.no_grad(): self.preds = self.model(xb).detach()   # an earlier cell's `preds`
    def after_batch(self):
        if self.training: self.last_pred, self.last_yb = self.learn.pred.detach(), self.learn.yb[0]
    def after_train(self):
        preds = self.preds if self.stale else self.last_pred
        self.values.append(float((preds.argmax(1) == self.last_yb).float().mean()))

@case("https://github.com/fastai/course22p2/pull/22",
      "the training loop calls its predictions `pred` but reports `accuracy(preds, yb)`: the printed accuracy scores a stale global from an earlier cell against this batch's labels",
      {'labels_misaligned'}, epochs=3, lr=0.5)
def report_scores_stale_preds(fixed):
    """'fix(04): `pred` typo': in `04_minibatch_training`, `fit()` computes `pred = model(xb)` and
    `loss = loss_func(pred, yb)` but ends each epoch with `report(loss, preds, yb)`; 'fix `pred` typo. Should be
    `preds`. This leads to poor accuracy' (merged: 'Many thanks!'). In a notebook `preds` is still defined by an earlier
    cell, so nothing fails: the report scores another model's predictions on other rows. The model, its loss and its
    training are sound; only the printed accuracy is wrong. No per-layer statistic can see it. The digits as pixels
    scaled to [0, 1] (the notebook's MNIST), its MLP (64-50-10), cross-entropy, plain SGD at its rate 0.5, batches of
    50; a callback plays `report` after each epoch (`values`), its stale `preds` being the untrained model's output on
    a first batch, as the notebook's earlier cell left it; the twin reports the last batch's own predictions. Measured
    (seeds 0 and 1): the reported accuracy is 0.16, 0.06, 0.16 and 0.24, 0.10, 0.14 over the 3 epochs while the
    validation accuracy reaches 0.93 and 0.92; the twin reports 0.80, 0.94, 0.92 and 0.72, 0.94, 0.92. Both runs train
    the same (batch losses end at 0.13 of their first, validation loss 0.28 and 0.29)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 50), nn.ReLU(), nn.Linear(50, 10))
    return Learner(tensor_dls(x / 16, y, bs=50), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD), cbs=[_StaleReport(stale=not fixed)])


# ---- targets: one-hot labels built from a column vector ----
def _reviews(n=1500, vocab=300, words=40, seed=0):
    """Bag-of-words movie reviews: each review counts 40 words drawn from a 300-word vocabulary, a positive review
    drawing 15% of them from 20 positive words and a negative one from 20 negative words. The counts `(n, 300)` and
    the labels as a one-column table, `(n, 1)` integers, as the notebook's `Y = (labels == 'positive')` DataFrame
    holds them"""
    g = _gen(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    w = torch.randint(0, vocab, (n, words), generator=g)
    tone = torch.where(y[:, None] == 1, torch.randint(0, 20, (n, words), generator=g),
                       20 + torch.randint(0, 20, (n, words), generator=g))
    w = torch.where(torch.rand(n, words, generator=g) < 0.15, tone, w)
    x = torch.zeros(n, vocab).scatter_add_(1, w, torch.ones(n, words))
    return x, y.numpy()[:, None]

def _to_categorical(y, nb_classes):
    "TFLearn's `to_categorical` as it was then: `Y[np.arange(len(y)), y] = 1.` (a `(n, 1)` `y` broadcasts to `(n, n)`)"
    y = np.asarray(y, dtype='int32')
    Y = np.zeros((len(y), nb_classes))
    Y[np.arange(len(y)), y] = 1.
    return torch.tensor(Y, dtype=torch.float32)

def _tflearn_ce(p, t, eps=1e-7):
    "TFLearn's `categorical_crossentropy` on softmax outputs: clipped, then minus the sum of targets times log"
    return -(t * torch.log(p.clamp(eps, 1 - eps))).sum(1).mean()

def _tflearn_acc(p, t):
    "TFLearn's `show_metric` accuracy: the argmax of the outputs against the argmax of the targets"
    return (p.argmax(1) == t.argmax(1)).float().mean()

@case("https://github.com/udacity/deep-learning/pull/152",
      "`to_categorical(Y.values[train_split], 2)` gets the labels as a column `(n, 1)`: the one-hot indexing broadcasts and every target row becomes [1, 1]",
      {'labels_one_class', 'multi_hot_softmax'}, epochs=30, lr=0.1)
def one_hot_from_label_column(fixed):
    """'tflearn intro - Fix `trainY` and `testY`': the sentiment notebook's solution built
    `trainY = to_categorical(Y.values[train_split], 2)` from a one-column DataFrame; the fix indexes the column,
    `Y.values[train_split, 0]` (merged; the duplicate #155: 'At the moment the accuracy comes to 50%'). TFLearn's
    `to_categorical` then did `Y[np.arange(len(y)), y] = 1.`: with `y` of shape `(n, 1)` the index broadcasts to
    `(n, n)` and every row gets a 1 in both columns, so each target is [1, 1] whatever the review's label. The
    notebook's network (fully connected 200 and 25 with ReLU, 2 with softmax), TFLearn's categorical cross-entropy,
    SGD at 0.1, batches of 128, on synthetic bag-of-words reviews (300 words, 40 per review); the twin's labels are a
    vector. Measured (seeds 0 and 1) over 30 epochs: every target row is [1, 1]; the loss stays at 2 ln 2 = 1.386 (batch
    losses end at 1.000 of their first, validation 1.3865), the softmax gives every review 0.50 (spread 0.006 and 0.007)
    and the accuracy against the true labels is 0.47 and 0.57, chance (TFLearn's metric, against the argmax of [1, 1],
    0.53 and 0.49); the twin's loss falls to 0.026 and 0.024 of its first (validation 0.10, accuracy 0.96)"""
    x, y = _reviews()
    t = _to_categorical(y[:, 0] if fixed else y, 2)
    xt, yt, xv, yv = _split(x, t, n_valid=300)
    model = nn.Sequential(nn.Linear(300, 200), nn.ReLU(), nn.Linear(200, 25), nn.ReLU(), nn.Linear(25, 2),
                          nn.Softmax(dim=1))
    return Learner(_dls(xt, yt, xv, yv, bs=128), model, loss_func=_tflearn_ce, metrics=_tflearn_acc,
                   opt_func=torch_opt(torch.optim.SGD))
