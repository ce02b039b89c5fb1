"""Bug zoo, a third family from forum threads and post-mortems (issue 45): a PyTorch forums thread (discuss.pytorch.org)
whose replies found the bug and whose poster confirmed the fix, and three blog posts in which the author tells of a
training run that misbehaved, how the cause was found, and the change that made it train. See `bugzoo.py`. Each case
cites its source; its truth (`kinds`, `layer`) was written before the case was ever run under the tool. Cases were
chosen for how common the bug is (Adam's epsilon lost in half precision, a training loader left unshuffled over data
stored class by class, an optimizer step that never reaches one layer's weights, a logit mask that turns ignored
positions into rows of -inf), never for whether the tool catches it. No fastai forums thread found in the stored copies
held both a training bug and a fix its poster confirmed, beyond those other families cite, so no case here comes from
them; fewer cases than asked for could be sourced. Each bug was checked with plain fastai before any run under the tool:
it shows its source's symptom, and its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _split
from bugs_fresh import _gen


# ---- numerics: Adam in half precision ----
def _half_ce(out, y):
    "Cross-entropy on the half-precision logits, computed in float32"
    return F.cross_entropy(out.float(), y)

@case("https://discuss.pytorch.org/t/adam-half-precision-nans/1765",
      "a network trained in float16 with Adam's default `eps=1e-8`, which rounds to 0 in half precision: "
      "the step divides by a second moment that underflowed to 0",
      {'nonfinite', 'nonfinite_loss'}, epochs=3, lr=1e-3)
def adam_eps_lost_in_half_precision(fixed):
    """'Adam+Half Precision = NaNs?': nets that train 'just fine on half precision with SGD+nesterov momentum' and 'with
    single precision (float32) and Adam' show 'the sudden appearance of NaNs' with Adam in float16. A reply: 'It's
    probably a 0 division somewhere. Have you tried using a much larger eps (say 1e-4)? The default 1e-8 is rounded to 0
    in half precision'; the poster: 'it looks like eps was the culprit after all'. Adam divides by `sqrt(v) + eps`; in
    float16 `v = 0.001 * grad**2` underflows to 0 for any gradient under about 8e-3, and the eps added to it is 0 too,
    so the step is `m / 0`: inf, or NaN where the gradient itself was 0. The digits as standardised vectors, an MLP
    (64-128-10) stored in float16 (weights, gradients and Adam's state all half), cross-entropy on its logits cast to
    float32, Adam at 1e-3, batches of 64; the twin passes `eps=1e-4` as the reply suggests. Measured: the first loss is
    2.35 and every later one NaN; after the first step 70% of the first layer's weights are inf and 2% NaN (the
    gradients of dead units were exactly 0), validation accuracy 0.106 for all 3 epochs. The twin's loss falls to 0.24
    of its first (validation loss 0.45, accuracy 0.91 in 3 epochs)"""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).half()
    return Learner(tensor_dls(x.half(), y, bs=64), model, loss_func=_half_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-4 if fixed else 1e-8))


# ---- data: a training loader that keeps the class order ----
@case("https://blog.gcc.ac.cn/post/2024/machinelearninghighaccuracyatfirstthendecrease",
      "the training loader is built with `shuffle=False` over data stored class by class: "
      "each stretch of batches holds one class",
      {'unshuffled_batches'}, epochs=6, lr=0.1)
def train_loader_not_shuffled_accuracy_falls(fixed):
    """'神经网络训练一开始准确率很高然后逐渐下降的问题排查' (a network whose accuracy is high at first, then falls): the post's table shows the
    training accuracy starting at 0.86 and sliding to 0.64 while the validation accuracy stays at 0.1443 every epoch;
    removing the augmentation and running on one process changed nothing; debugging the single-machine code part by
    part, the author found the cause in the loader's `shuffle=False` ('开启 shuffle 后,数据就正常了': with shuffle on, the
    figures were normal; the post's fix is `DistributedSampler(train, shuffle=True)`). The digits sorted by class as a
    folder of images lists them, an MLP (64-128-10), cross-entropy, SGD with momentum 0.9 and weight decay 5e-4, batches
    of 32; the twin shuffles. The post's learning rate is 0.01, at which the bug is milder here (validation accuracy
    0.78 against the twin's 0.96 after 6 epochs); at 0.1 it shows the post's symptom. No layer misbehaves in a way its
    statistics show: each batch is one class and the network follows it. Measured at 0.1: the training accuracy falls
    from 0.32 in the first epoch to 0.08 in the sixth, validation accuracy between 0.086 and 0.139 (after the last epoch
    one class is predicted for 355 of the 360 digits), batch losses at 2.06 times their first (a single-class batch is
    fitted within a few steps, then the next class undoes it); the twin's training accuracy rises to 0.996, validation
    0.978, its loss falls to 0.012 of its first"""
    x, y = digits_raw()
    xt, yt, xv, yv = _split((x - x.mean()) / x.std(), y, n_valid=360)
    order = torch.argsort(yt, stable=True)   # stored class by class
    xt, yt = xt[order], yt[order]
    train = DataLoader([(xt[i], yt[i]) for i in range(len(xt))], bs=32, shuffle=fixed, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(xv[i], yv[i]) for i in range(len(xv))], bs=32))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return Learner(dls, model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=5e-4))


# ---- the optimizer: a step that never lands on one layer ----
class _MPSAdam(torch.optim.Adam):
    """Adam as the post found it running on Apple's MPS backend: its in-place update kernels wrote nothing into an
    output that is not contiguous, so a non-contiguous parameter (and its Adam state) is computed for and never changed.
    A CPU Adam has no such fault: this restores such parameters after each step, as the kernels left them"""
    @torch.no_grad()
    def step(self, closure=None):
        kept = [(p, p.clone()) for g in self.param_groups for p in g['params'] if not p.is_contiguous()]
        loss = super().step(closure)
        for p, old in kept: p.copy_(old)
        return loss

class _TiedInitSAE(nn.Module):
    """A sparse autoencoder's shape: an overcomplete ReLU encoder whose weight starts as the decoder's transpose (a copy
    of it, transposed: not contiguous), and the decoder"""
    def __init__(self, d=64, h=128):
        super().__init__()
        self.enc, self.dec = nn.Linear(d, h), nn.Linear(h, d)
        self.enc.weight = nn.Parameter(self.dec.weight.detach().clone().t())   # its own storage, transposed
    def forward(self, x): return self.dec(F.relu(self.enc(x)))

@case("https://elanapearl.github.io/blog/2025/the-bug-that-taught-me-pytorch",
      "the optimizer's in-place update kernels write nothing into a non-contiguous weight (the MPS backend's fault): "
      "the encoder, initialised as the decoder's transpose, never changes",
      {'frozen'}, layer='enc', epochs=5, lr=1e-3)
def encoder_weight_noncontiguous_never_updated(fixed):
    """'the bug that taught me more about PyTorch than years of using it': 'My training loss plateaued and wouldn't
    budge'; after every hyperparameter and a rewritten loss it was 'a niche PyTorch bug': 'Expected to fix: my
    hyperparameters. Actually had to fix: PyTorch backend.' The stored copy holds the opening; the summaries of the post
    stored with it name the cause: on the MPS backend `addcmul_` 'silently fails on non-contiguous output tensors', and
    the model's encoder weights stayed fixed. The fix was the backend's. The digits' pixels scaled to [0, 1], an
    autoencoder of 64-128-64 with a ReLU code whose encoder weight starts as the decoder's transpose (a common sparse
    autoencoder initialisation, and a non-contiguous view), MSE reconstruction, Adam at 1e-3 with the MPS fault
    reproduced on the CPU (`_MPSAdam`: non-contiguous parameters are left as they were); the twin runs the same model
    under the working `torch.optim.Adam`. The encoder's weights get gradients every step and never change: a layer
    frozen by the optimizer, not by `requires_grad`. The decoder and the encoder's bias still learn on the encoder's
    random features, so the loss falls, more slowly than the twin's, rather than stopping flat as the post's did.
    Measured over 5 epochs: none of the encoder's weights moves, batch losses fall to 0.18 of their first, validation
    loss 0.024; in the twin 93% of the encoder's weights move, batch losses fall to 0.069 of their first, validation
    loss 0.0075"""
    x = digits_raw()[0] / 16
    return Learner(tensor_dls(x, x, bs=64), _TiedInitSAE(), loss_func=nn.MSELoss(),
                   opt_func=partial(OptimWrapper, opt=torch.optim.Adam if fixed else _MPSAdam))


# ---- the loss: ignored positions masked with -inf ----
def _padded_chains(n=800, max_len=24, vocab=16, seed=0):
    """Next-symbol prediction on sequences of a fixed random Markov chain, 8 to 24 symbols long, padded to 24: the
    inputs pad with the symbol `vocab`, the targets with -1 (ignored by the loss)"""
    g = _gen(seed)
    trans = torch.softmax(torch.randn(vocab, vocab, generator=g) * 3, 1)
    s = torch.zeros(n, max_len + 1, dtype=torch.long)
    s[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(max_len): s[:, t + 1] = torch.multinomial(trans[s[:, t]], 1, generator=g).squeeze(1)
    x, y = s[:, :-1].clone(), s[:, 1:].clone()
    pad = torch.arange(max_len)[None] >= torch.randint(8, max_len + 1, (n,), generator=g)[:, None]
    x[pad], y[pad] = vocab, -1
    return x, y

class _MaskedTagger(nn.Module):
    """An embedding, a GRU and a head over a vocabulary with `extra` symbols that must never be predicted, masked by
    adding -inf to their logits; in the bug the padded positions get -inf in every column as well"""
    def __init__(self, fixed, vocab=16, extra=4):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(vocab + 1, 32), nn.GRU(32, 64, batch_first=True)
        self.head, self.vocab, self.fixed = nn.Linear(64, vocab + extra), vocab, fixed
    def forward(self, x):
        out = self.head(self.rnn(self.emb(x))[0])
        mask = torch.zeros_like(out)
        mask[..., self.vocab:] = float('-inf')                      # symbols never to predict
        if not self.fixed: mask[x == self.vocab] = float('-inf')   # the padded positions too: whole rows of -inf
        return out + mask

def _seq_ce(out, y):
    "Cross-entropy over every position, the padded ones (target -1) ignored"
    return F.cross_entropy(out.flatten(0, 1), y.flatten(), ignore_index=-1)

@case("https://jkschin.com/blog/2023/cross-entropy-loss-ignore-index/",
      "positions whose target is `ignore_index` get logits of -inf in every column: "
      "left out of the loss's value, they still send NaN gradients back",
      {'nonfinite', 'nonfinite_loss'}, epochs=4, lr=3e-3)
def ignored_positions_masked_to_minus_inf(fixed):
    """'Intricacies of nn.CrossEntropyLoss Ignore Index and Gradients': a GPT-based model's output 'is postprocessed
    with a mask' of -inf values; 'For convenience, I also masked out all the irrelevant tokens with -inf that are not
    included in the ground truth and also set their relevant class to -1 and set ignore_index = -1'; 'the loss was a
    reasonable float value on the first step, but became nan in the second step'. The fix: mask only the columns that
    must be masked and, for the ignored rows, 'mask with 0'. A row of -inf has a NaN log-softmax; `ignore_index` drops
    it from the loss's value but its gradient is `0 * NaN`, and the first step writes NaN into every weight. Next-symbol
    prediction on padded Markov sequences, an embedding, a GRU of 64 and a head over 20 symbols whose last 4 are always
    masked, cross-entropy with `ignore_index=-1`, Adam at 3e-3, batches of 32, the mask added to the logits; the twin
    masks the padded positions with 0. Measured: the first batch loss is 2.79, every later one NaN, and every parameter
    is NaN after the first step; the twin's loss falls to 0.46 of its first (validation loss 1.23 after 4 epochs)"""
    x, y = _padded_chains()
    return Learner(tensor_dls(x, y, bs=32), _MaskedTagger(fixed), loss_func=_seq_ce,
                   opt_func=torch_opt(torch.optim.Adam))
