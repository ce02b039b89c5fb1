"""Bug zoo, a fifteenth GitHub family (issue 45): from the issues of NLP training libraries (TRL, AllenNLP), at threads
no other family cites. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the
case was ever run under the tool. Cases were chosen for how common the bug is (the padding token set to the
end-of-sequence token, so that the labels' padding mask drops every real EOS too, a preference loss whose temperature
`beta` is 0, a masked log-softmax that takes the log of an all-zero mask), never for whether the tool catches it. The
masked EOS leaves every statistic of training healthy (the loss falls; only one class never reaches the loss): its
docstring says so. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its
thread's symptom, and its fixed twin trains."""
from bugzoo import *
from bugs_data import _gen


# ---- language modelling: completions that end with EOS, padded ----
_V, _EOS, _PAD, _SEP, _T = 24, 1, 0, 2, 14   # vocabulary, EOS, the distinct padding id (the twin's), separator, length

def _completions(n=1000, pad_id=_PAD, seed=0):
    """Synthetic prompt-and-completion texts: a prompt of 3 to 6 random tokens (among 3..23), a separator, the
    completion (the prompt again), then EOS, then `pad_id` up to 14 tokens; duplicates dropped (none of the kept texts
    is in both splits). Returns the ids `(n', 14)`"""
    g = _gen(seed)
    ids = torch.full((n, _T), pad_id, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(3, 7, (1,), generator=g))
        r = torch.randint(3, _V, (k,), generator=g)
        ids[i, :2 * k + 2] = torch.cat([r, torch.tensor([_SEP]), r, torch.tensor([_EOS])])
    keep = sorted({tuple(row): i for i, row in enumerate(ids.tolist())}.values())   # one of each distinct text
    return ids[torch.tensor(keep)]

def _lm_labels(ids, pad_id):
    """`DataCollatorForLanguageModeling` as TRL's SFT used it: the labels are the ids with every `pad_id` set to -100;
    the model reads `ids[:, :-1]` and predicts `labels[:, 1:]`"""
    labels = ids.masked_fill(ids == pad_id, -100)
    return ids[:, :-1], labels[:, 1:]

class _TinyLM(nn.Module):
    "A causal language model, scaled down: embeddings, a one-way GRU, a linear head over the vocabulary"
    def __init__(self, vocab=_V, dim=32, hidden=64):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(vocab, dim), nn.GRU(dim, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)
    def forward(self, x): return self.head(self.rnn(self.emb(x))[0])

def _lm_loss(out, y): return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=-100)

def _eos_position(y):
    "Where each completion's EOS is the target: the first label that is EOS or -100 (the bug's EOS labels are -100)"
    return ((y == _EOS) | (y == -100)).float().argmax(1)

def stops(out, y):
    "The share of completions whose most likely next token after their last content token is EOS (they stop)"
    pos = _eos_position(y)
    return (out[torch.arange(len(out)), pos].argmax(-1) == _EOS).float().mean()

@case("https://github.com/huggingface/trl/issues/1623",
      "the padding token is the EOS token and the collator masks every padding id out of the labels: each completion's "
      "real EOS is masked too, and the model never learns to stop",
      {'ignored_class'}, epochs=6, lr=1e-2)
def sft_pad_is_eos_masks_eos(fixed):
    """'Learning to generate EOS tokens': 'sometimes the trained SFT models do not learn to stop generations. In
    other words, the model never learn to generate EOS tokens'; the maintainer traced it to 'the dataset
    preprocessing': printing a batch showed that 'the pad token / eos token corresponds to attention mask = 0', and
    `DataCollatorForLanguageModeling` sets every padding id to -100 in the labels. TRL later appended the EOS to
    every text (#3091), where a commenter names the root: 'setting the pad token to the eos token. Then the SFT
    preprocessing masks everything that's a pad token (=eos token), including the real eos token'. With `pad_token =
    eos_token` the EOS is never a target: cross-entropy teaches the model to give it no probability. Nothing in the
    network is wrong and the loss falls: only the targets that reach the loss (one class never among them) show the
    bug. Ported: 1,000 synthetic texts (a prompt of 3 to 6 random tokens out of 21, a separator, the prompt copied
    as the completion, EOS, padded to 14 tokens), a GRU language model (embeddings of 32, 64 units) trained on every
    token as SFT does by default, cross-entropy with `ignore_index=-100`, Adam at 1e-2, batches of 32; the bug pads
    with the EOS id and masks it, the twin pads with a distinct id 0, so the EOS that ends each text reaches the
    loss. Measured (seeds 0 and 1): 996 distinct texts of the 1,000 drawn, 797 of them in training: the twin's
    training labels hold 797 EOS, the bug's none. The bug's batch losses end at 0.66 of their first at both seeds
    (the copy is half learnt: 0.55 of the validation copy tokens right, the twin 0.52), yet after each of 6 epochs
    no validation text stops (EOS is never the most likely token after the last copied token), its mean probability
    there 2.1e-3 and 3.7e-4 at the end (at most 0.039): the model never emits EOS; the twin stops 0.995 and 1.0 of
    them (EOS at 0.85 and 0.98 on average there; validation loss 2.01 and 2.05 against the bug's 2.17 and 2.16), its
    batch losses ending at 0.63 of their first at both seeds"""
    pad = _PAD if fixed else _EOS
    x, y = _lm_labels(_completions(pad_id=pad), pad)
    return Learner(tensor_dls(x, y, bs=32), _TinyLM(), loss_func=_lm_loss, metrics=stops,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- preference optimisation: DPO's temperature ----
def _preference_pairs(seed=0):
    """Preference pairs on the digits: the prompt is an image (pixels standardised), the responses are the 10 labels;
    the chosen response is the true label, the rejected one another label at random. Returns the prompts `(n, 64)` and
    the responses `(n, 2)`: chosen, rejected"""
    x, y = digits_raw()
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    other = (y + torch.randint(1, 10, y.shape, generator=_gen(seed + 1))) % 10
    return x, torch.stack([y, other], 1)

def _policy(): return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

def _dpo_loss(beta):
    """TRL's sigmoid DPO loss with precomputed reference log-probabilities (`precompute_ref_log_probs`): the targets
    hold the chosen and rejected responses and the reference's log-probabilities of each;
    `-logsigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))`"""
    def loss(out, y):
        lp = F.log_softmax(out, -1)
        c, r = y[:, 0].long(), y[:, 1].long()
        i = torch.arange(len(out))
        margin = (lp[i, c] - y[:, 2]) - (lp[i, r] - y[:, 3])
        return -F.logsigmoid(beta * margin).mean()
    return loss

def reward_accuracy(beta):
    "TRL's `rewards/accuracies`: the share of pairs whose chosen reward `beta * (pi_c - ref_c)` beats the rejected's"
    def rewards_accuracies(out, y):
        lp = F.log_softmax(out, -1)
        i = torch.arange(len(out))
        rc, rr = beta * (lp[i, y[:, 0].long()] - y[:, 2]), beta * (lp[i, y[:, 1].long()] - y[:, 3])
        return (rc > rr).float().mean()
    return rewards_accuracies

@case("https://github.com/huggingface/trl/issues/1627",
      "DPO is run with `beta=0.0`: the loss is `-logsigmoid(0)`, ln 2 whatever the policy does, every gradient is "
      "zero and the rewards stay at 0",
      {'loss_stalled', 'gradient_flow'}, epochs=4, lr=1e-3)
def dpo_beta_zero(fixed):
    """'DPO loss remains 0.6931 and reward is stuck at 0.0': 'the problem of "DPO loss remains 0.6931 from the first
    step and the rewards stuck at 0.0"'; the reporter found the cause: 'i set ref_model is none and beta is 0.0, in
    fact bata influence the loss and it cant be 0.0, so i set it to 0.1'. DPO's loss is `-logsigmoid(beta *
    margin)`: with `beta = 0` it is ln 2 = 0.6931 for any policy, its gradient is zero for every parameter, and the
    rewards (`beta` times the log-ratios) are 0. Nothing in the network is wrong; the loss no longer depends on it.
    Ported: the policy an MLP (64-64-10) over the digits' standardised pixels, the responses the 10 labels (chosen:
    the true one, rejected: another at random), the reference the policy at initialisation (`ref_model=None`), its
    log-probabilities precomputed into the targets as TRL's `precompute_ref_log_probs` does, TRL's sigmoid loss,
    Adam at 1e-3, batches of 32; the twin sets `beta=0.1`. Measured (seeds 0 and 1): every one of the 176 batch
    losses is 0.6931 (ratio 1.00), every gradient is exactly 0 and no weight moves in 4 epochs; the validation loss
    is 0.6931 and `rewards/accuracies` 0.0 after each epoch, as in the report, and the policy is its initialisation
    (its argmax is the chosen label for 0.078 and 0.097 of the validation prompts); the twin's batch losses end at
    0.57 and 0.56 of their first, its validation loss 0.386 and 0.394 and reward accuracy 0.94 after 4 epochs (its
    argmax is the chosen label for 0.80 and 0.75 of the validation prompts)"""
    x, pairs = _preference_pairs()
    model = _policy()
    with torch.no_grad(): ref = F.log_softmax(model(x), -1)
    i = torch.arange(len(x))
    y = torch.stack([pairs[:, 0].float(), pairs[:, 1].float(), ref[i, pairs[:, 0]], ref[i, pairs[:, 1]]], 1)
    beta = 0.1 if fixed else 0.0
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=_dpo_loss(beta), metrics=reward_accuracy(beta),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- a pointer over a passage: masked log-softmax with rows masked whole ----
_N, _Q, _D = 10, 3, 8   # passage positions, question slots, features

def _passages(n=1200, seed=0):
    """Passages of 4 to 10 positions (each a feature vector of 8 from N(0, 1), padded with zeros to 10) and 1 to 3
    questions per passage (padded to 3 slots); a question is a noisy copy of one valid position's features (its answer).
    Packed as `(n, 13, 9)`: the 10 positions then the 3 question slots, the last column each row's mask. Targets
    `(n, 3)`: the answer's position, -1 for an empty slot"""
    g = _gen(seed)
    lens, nq = torch.randint(4, _N + 1, (n,), generator=g), torch.randint(1, _Q + 1, (n,), generator=g)
    pmask = (torch.arange(_N)[None] < lens[:, None]).float()
    qmask = (torch.arange(_Q)[None] < nq[:, None]).float()
    p = torch.randn(n, _N, _D, generator=g) * pmask[..., None]
    ans = (torch.rand(n, _Q, generator=g) * lens[:, None]).long()
    q = (p[torch.arange(n)[:, None], ans] + 0.3 * torch.randn(n, _Q, _D, generator=g)) * qmask[..., None]
    x = torch.cat([torch.cat([p, pmask[..., None]], -1), torch.cat([q, qmask[..., None]], -1)], 1)
    return x, torch.where(qmask > 0, ans, -1)

class _MaskedLogSoftmax(nn.Module):
    """AllenNLP's `masked_log_softmax`: the log of the mask added to the scores, then `log_softmax`. As it was (#890)
    the log is of the mask itself, so a row masked whole is all -inf and its log-softmax NaN; as fixed, of
    `mask + 1e-45` (a large negative number instead of -inf: a row masked whole stays finite)"""
    def __init__(self, fixed): super().__init__(); self.fixed = fixed
    def forward(self, scores, mask):
        return F.log_softmax(scores + ((mask + 1e-45) if self.fixed else mask).log(), -1)

class _Pointer(nn.Module):
    """A reading-comprehension pointer, scaled down: positions and questions encoded by MLPs, bilinear scores of each
    question slot against each position, `masked_log_softmax` under the mask `question slot × valid position`"""
    def __init__(self, fixed, hidden=32):
        super().__init__()
        self.enc_p = nn.Sequential(nn.Linear(_D, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.enc_q = nn.Sequential(nn.Linear(_D, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.pointer = _MaskedLogSoftmax(fixed)
    def forward(self, x):
        p, q = x[:, :_N], x[:, _N:]
        scores = self.enc_q(q[..., :-1]) @ self.enc_p(p[..., :-1]).transpose(1, 2)   # (batch, slots, positions)
        return self.pointer(scores, q[..., -1:] * p[..., -1][:, None])

def _pointer_nll(out, y):
    "AllenNLP's weighted sequence loss: each slot's negative log-likelihood times its mask, over the questions"
    m = (y >= 0).float()
    nll = -out.gather(-1, y.clamp_min(0)[..., None]).squeeze(-1)
    return (nll * m).sum() / m.sum()

def answer_accuracy(out, y):
    "The share of the real questions whose most likely position is their answer"
    m = y >= 0
    return (out.argmax(-1)[m] == y[m]).float().mean()

@case("https://github.com/allenai/allennlp/issues/890",
      "`masked_log_softmax` adds `mask.log()` to the scores: a row masked whole (an empty question slot) is all -inf "
      "and its log-softmax NaN, which the loss's zero weight does not remove",
      {'nonfinite'}, layer='pointer', epochs=4, lr=3e-3)
def masked_log_softmax_nan_rows(fixed):
    """'util.masked_log_softmax() Returning Nan's': given a mask whose second row is all zeros, 'the returned vector
    from masked_log_softmax has nans in the 2nd row since the softmax was applied over -inf' (the reporter 'getting
    around this by doing some operations with the mask afterwards'); the maintainer: 'This is a bug we need to fix',
    and AllenNLP's fix takes the log of `mask + 1e-45` rather than of the mask. A padded slot's loss is multiplied
    by its zero weight, but `0 × NaN` is NaN: the batch's loss, then the gradients, then the weights are NaN.
    Ported: 1,200 synthetic passages (4 to 10 positions of 8 features, padded to 10) with 1 to 3 questions each
    (padded to 3 slots; a question is a noisy copy of its answer's features), an MLP encoder each for positions and
    questions, bilinear scores, AllenNLP's `masked_log_softmax` under the mask `question slot × valid position` (a
    padded slot's row masked whole), the weighted negative log-likelihood over the real questions, Adam at 3e-3,
    batches of 32; the twin's `masked_log_softmax` is AllenNLP's fixed one. The inputs are finite: the NaN is born
    in the masked log-softmax. Measured (seeds 0 and 1): 32% of the question slots are empty (65% of the passages
    have one: every batch holds some); at initialisation exactly those rows of the output are NaN and no real
    question's row is; the first batch loss is NaN, its step makes all 8 parameter tensors wholly NaN, and all 120
    batch losses and the validation loss after each of 4 epochs are NaN (accuracy 0.166: the argmax of a NaN row is
    position 0); the twin answers 0.990 of the validation questions at both seeds (validation loss 0.051 and 0.055),
    its batch losses ending at 0.032 and 0.033 of their first"""
    x, y = _passages()
    return Learner(tensor_dls(x, y, bs=32), _Pointer(fixed), loss_func=_pointer_nll, metrics=answer_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
