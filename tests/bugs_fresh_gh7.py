"""Bug zoo, a seventh family from GitHub threads of model-code repositories, threads no other family cites (a causal
transformer decoder, a graph-matching network, Hugging Face's GPT fine-tuning example, MultiBench, a molecule VAE). See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever
run under the tool. Cases were chosen for how common the bug is (a decoder trained without its causal mask, a softmax
before `CrossEntropyLoss`, an example that never clears its gradients, a validation function that puts the model back in
training mode, a reconstruction loss counted over the padding), never for whether the tool catches it. Three leave every
per-layer statistic of training healthy: the decoder that sees the future learns well (too well), the validation in
training mode changes only what is measured, the padding counted in the loss is a choice of the loss; their docstrings
say so. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its thread's
symptom, its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _NoEvalMode
from bugs_fresh import _gen
from bugs_fresh10 import _Block, _text


# ---- the data: a decoder that sees the tokens it predicts ----
class _DecoderBlock(_Block):
    "A pre-LayerNorm decoder block whose self-attention takes the causal mask only if `causal`"
    def __init__(self, d, heads, causal):
        super().__init__(d, heads)
        self.causal = causal
    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1) if self.causal else None
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

class _Decoder(nn.Module):
    "A small transformer decoder: token and position embeddings, 2 blocks, a final LayerNorm, a head to the vocabulary"
    def __init__(self, causal, vocab=24, block=32, d=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.Sequential(*[_DecoderBlock(d, heads, causal) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln_f(self.blocks(x)))

def _lm_loss(logits, y): return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

@case("https://github.com/alex-matton/causal-transformer-decoder/issues/1",
      "the transformer decoder is trained on whole sequences with no causal target mask: each position attends to the tokens it must predict",
      {'future_leak'}, epochs=10, lr=3e-3)
def decoder_trained_without_causal_mask(fixed):
    """'No causal masking': 'I don't see where to input the causal target mask so that the network can't simply copy
    tokens to the output. When I train without it, the performance is terrible, so I assume the network just learns to
    copy the future tokens'; the author: 'Indeed the architecture was only here for inference. I just improved the model
    to make training work - it now trains like a regular transformer' (closed, fixed). A small decoder (2 pre-LayerNorm
    blocks of width 64) trained with teacher forcing on sequences of a random Markov chain of 24 symbols (no causal
    model can go below the chain's entropy rate, 1.17 nats), cross-entropy, Adam at 3e-3, 10 epochs; the twin masks the
    future. Every layer is healthy and the run learns, far too well. Measured: the training loss falls from 1.84 to
    0.032 (0.018 of its first) and the validation loss to 0.078, far below the entropy rate; run as it would generate
    (each position given only its prefix) the same model scores 3.89 on validation, worse than a uniform guess (ln 24 =
    3.18), at a next-token accuracy of 0.27; the twin's falls from 1.84 to 1.06 (0.57 of its first; validation 1.35, the
    same on prefixes, accuracy 0.60)"""
    x, y = _text()
    return Learner(tensor_dls(x, y, bs=32), _Decoder(causal=fixed), loss_func=_lm_loss,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the output: a softmax before the cross-entropy ----
def _matching_pairs(n=1200, nodes=10, feats=8, noise=0.3, seed=0):
    "Pairs of node sets (random features, a permuted noisy copy) and each first node's index in the second"
    g = _gen(seed)
    a = torch.randn(n, nodes, feats, generator=g)
    perm = torch.stack([torch.randperm(nodes, generator=g) for _ in range(n)])   # `b[i, k]` is `a[i, perm[i, k]]`
    b = a.gather(1, perm[..., None].expand(-1, -1, feats)) + noise * torch.randn(n, nodes, feats, generator=g)
    return torch.stack([a, b], 1), perm.argsort(1)   # the match of node `j` of `a` in `b`

class _Matcher(nn.Module):
    "A shared node encoder; each node of the first set scored against each of the second, softmaxed if `softmax`"
    def __init__(self, softmax, feats=8, d=64):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(feats, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.softmax = nn.Softmax(-1) if softmax else nn.Identity()
    def forward(self, x):
        e = self.encoder(x)                                     # (batch, 2, nodes, d)
        return self.softmax(e[:, 0] @ e[:, 1].transpose(1, 2))  # (batch, nodes, nodes)

def _match_ce(scores, t): return F.cross_entropy(scores.reshape(-1, scores.shape[-1]), t.reshape(-1))
def _match_acc(scores, t): return (scores.argmax(-1) == t).float().mean()

@case("https://github.com/mlelarge/graph_neural_net/pull/37",
      "the matching network softmaxes its node-to-node scores and gives them to `CrossEntropyLoss`, which applies its own softmax",
      {'output_activation'}, layer='softmax', epochs=5, lr=1e-3)
def matching_scores_softmaxed_before_cross_entropy(fixed):
    """'Fix bug softmax': 'There was a softmax before a crossentropyloss... I removed the softmax' (merged). The
    repository matches the nodes of two graphs by the scores of their embeddings, each node's row of scores against the
    candidates of the other graph going to a cross-entropy. Sets of 10 nodes with 8 random features and a permuted copy
    with noise 0.3, a shared node encoder (8-64-64-64), the scores as dot products, cross-entropy over the 10
    candidates, Adam at 1e-3; the twin gives the scores to the loss as they are. Measured over 5 epochs: the training
    loss cannot go below ln(9 + e) - 1 = 1.46 and stops at 1.55 (0.70 of its first, 2.21), validation 1.55 at a matching
    accuracy of 0.92; the twin's falls from 1.75 to 0.13 (0.074 of its first; validation 0.12, accuracy 0.96)"""
    x, t = _matching_pairs()
    return Learner(tensor_dls(x, t, bs=32), _Matcher(softmax=not fixed), loss_func=_match_ce, metrics=_match_acc,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the loop: gradients never cleared ----
def _endings(n=1200, length=16, vocab=24, seed=0):
    "Two candidate sequences a row, one from a 'story' Markov chain, one from another; the label: which is the story's"
    g = _gen(seed)
    def chain(): return torch.softmax(torch.randn(vocab, vocab, generator=g) * 2, 1)
    def walk(trans, m):
        s = torch.zeros(m, length, dtype=torch.long)
        s[:, 0] = torch.randint(0, vocab, (m,), generator=g)
        for k in range(1, length): s[:, k] = torch.multinomial(trans[s[:, k - 1]], 1, generator=g).squeeze(1)
        return s
    good, bad = walk(chain(), n), walk(chain(), n)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.where(y[:, None, None] == 0, torch.stack([good, bad], 1), torch.stack([bad, good], 1))
    return x, y

class _DoubleHeadGPT(nn.Module):
    "`OpenAIGPTDoubleHeadsModel`'s multiple-choice head, scaled down: a causal GPT scoring each candidate's last token"
    def __init__(self, vocab=24, length=16, d=64, heads=4, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.blocks = nn.Sequential(*[_Block(d, heads) for _ in range(layers)])
        self.ln_f, self.mc_head = nn.LayerNorm(d), nn.Linear(d, 1)
        for p in self.parameters():
            if p.dim() > 1: nn.init.normal_(p, 0, 0.02)
    def forward(self, x):
        b, c, t = x.shape
        h = self.wte(x.reshape(b * c, t)) + self.wpe(torch.arange(t, device=x.device))
        return self.mc_head(self.ln_f(self.blocks(h))[:, -1]).reshape(b, c)

class _NoZeroGrad(Callback):
    "The example's loop: `loss.backward()`, `optimizer.step()`, never `optimizer.zero_grad()` (fastai's does nothing)"
    order = -50
    def before_fit(self): self.learn.opt.zero_grad = lambda *a, **k: None

@case("https://github.com/huggingface/transformers/issues/340",
      "the GPT fine-tuning example steps the optimiser after each backward pass but never zeroes the gradients: each step adds every past gradient",
      {'grads_not_zeroed', 'loss_diverging'}, epochs=4, lr=1e-3)
def gpt_finetune_example_without_zero_grad(fixed):
    """'optimizer.zero_grad() in run_openai_gpt.py?': 'should there be a call to `optimizer.zero_grad()` after updating
    parameters so that we zero out the gradients between minibatches?'; the maintainer: 'Oh that's a mistake indeed,
    thanks for pointing out. Fixed on master.' The example fine-tunes `OpenAIGPTDoubleHeadsModel` on a two-ending choice
    (ROCStories) with Adam. A small causal GPT (2 blocks of width 64, GPT's N(0, 0.02) initialisation, no pretrained
    weights) scoring each of two candidate sequences from its last token, the right one drawn from a 'story' Markov
    chain, the other from another chain; cross-entropy over the two, Adam at 1e-3 (the example's 6.25e-5 suits
    pretrained weights); the twin clears the gradients. Measured: the loss falls in the first epoch, then climbs and
    swings (epochs' training losses 0.45, 0.77, 0.94, 0.77, validation 0.61, 0.90, 0.82, 0.72, accuracy 0.73, 0.56,
    0.66, 0.48: back to chance); its last batches' loss is 1.5 times its first's; the twin's falls from 0.32 to 0.055
    (0.17 of its first; validation 0.12, accuracy 0.95)"""
    x, y = _endings()
    return Learner(tensor_dls(x, y, bs=16), _DoubleHeadGPT(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_NoZeroGrad()])


# ---- modes: validation in training mode ----
class _LateFusion(nn.Module):
    "MultiBench's late fusion, scaled down: an encoder a modality (Linear, BatchNorm, ReLU, dropout), a head"
    def __init__(self, n_in=32, d=64, n_out=10, p=0.5):
        super().__init__()
        def enc(): return nn.Sequential(nn.Linear(n_in, d), nn.BatchNorm1d(d), nn.ReLU(), nn.Dropout(p))
        self.enc1, self.enc2, self.head = enc(), enc(), nn.Linear(2 * d, n_out)
    def forward(self, x): return self.head(torch.cat([self.enc1(x[:, :32]), self.enc2(x[:, 32:])], 1))

@case("https://github.com/pliang279/MultiBench/issues/26",
      "the validation function calls `model.eval()` and then `model.train()` before its forward passes: validation runs with dropout on and BatchNorm on batch statistics",
      {'train_mode_in_eval', 'eval_nondeterministic'}, epochs=6, lr=1e-3)
def multimodal_validation_in_train_mode(fixed):
    """'Did you forget switch model train/eval state?': 'I found a small performance mismatch problem. It seems that the
    pytorch model is not switched to eval state when you validate. At line 169, model.eval() is called, and a few lines
    later, model.train() is called'; the authors: 'We have fixed the code by removing the model.train() functions in the
    validation function.' MultiBench's supervised late fusion scaled down: the digits as two 'modalities' (the top and
    the bottom halves of the image, standardised), an encoder each (Linear, BatchNorm, ReLU, dropout 0.5), concatenated,
    a linear head; cross-entropy, Adam at 1e-3, batches of 32; the bug as a callback that puts the model back in
    training mode before each validation. Training is identical; only what is measured changes (and BatchNorm's running
    statistics are updated by the validation batches). No statistic of a layer in training sees it. Measured after 6
    epochs: validation loss 0.40 at an accuracy of 0.930, and two more passes over the same validation set give 0.417
    (0.905) and 0.396 (0.911); the twin's validation loss is 0.273 at an accuracy of 0.955, the same on every pass; the
    training loss falls to 0.18 of its first in both (the same batches, the same steps)"""
    x, y = digits_raw()
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    return Learner(tensor_dls(x, y, bs=32), _LateFusion(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_NoEvalMode()])


# ---- the loss: padding counted ----
PAD = 0

def _smiles_like(n=1500, length=32, vocab=16, seed=0):
    "Strings of a random Markov chain over ids 1..vocab-1, 4 to 12 long, padded with 0 to `length` (mostly padding)"
    g = _gen(seed)
    trans = torch.softmax(torch.randn(vocab - 1, vocab - 1, generator=g) * 2, 1)
    s = torch.zeros(n, length, dtype=torch.long)
    s[:, 0] = torch.randint(0, vocab - 1, (n,), generator=g)
    for k in range(1, length): s[:, k] = torch.multinomial(trans[s[:, k - 1]], 1, generator=g).squeeze(1)
    lens = torch.randint(4, 13, (n, 1), generator=g)
    s = s + 1
    s[torch.arange(length) >= lens] = PAD
    return s

class _SeqVAE(nn.Module):
    "A GRU VAE over token strings: the encoder's last state to a mean and log-variance, a sample, a teacher-forced decoder"
    def __init__(self, vocab=16, d=64, z=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.enc, self.dec = nn.GRU(d, d, batch_first=True), nn.GRU(d, d, batch_first=True)
        self.mu, self.logvar, self.z2h = nn.Linear(d, z), nn.Linear(d, z), nn.Linear(z, d)
        self.out = nn.Linear(d, vocab)
        self.kl = torch.tensor(0.)
    def forward(self, x):
        h = self.enc(self.emb(x))[1][0]
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if self.training else mu
        self.kl = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1).mean()
        inp = F.pad(x[:, :-1], (1, 0), value=PAD)   # shifted right, a start token
        return self.out(self.dec(self.emb(inp), self.z2h(z)[None])[0])

def _vae_loss(ignore):
    "The reconstruction cross-entropy of the repository's `loss_function` (`ignore_index` the pad id after the fix)"
    def loss(out, x): return F.cross_entropy(out.reshape(-1, out.shape[-1]), x.reshape(-1), ignore_index=ignore)
    return loss

class _AddKL(Callback):
    "Add the model's KL term (weighted `beta`) to the reconstruction loss, as the repository's loss does"
    order = 1
    def __init__(self, beta=0.01): self.beta = beta
    def after_loss(self): self.learn.loss_grad = self.learn.loss_grad + self.beta * self.learn.model.kl

def _token_acc(out, x):
    "Reconstruction accuracy on the real tokens only (the padding left out)"
    keep = x != PAD
    return (out.argmax(-1)[keep] == x[keep]).float().mean()

@case("https://github.com/DaoyuanLi2816/Molecule-Generator/pull/20",
      "the VAE's reconstruction cross-entropy runs over every position, the `<pad>` ones included: most of the loss is spent predicting padding",
      {'padding_in_loss'}, epochs=6, lr=1e-3)
def vae_reconstruction_counts_padding(fixed):
    """'Ignore padding positions in the reconstruction loss': '`loss_function` computed `F.cross_entropy` over *all*
    token positions, including `<pad>`. Since padded sequences are mostly padding, the model spent most of its loss
    budget learning to predict the pad token'; the fix passes the pad index as `ignore_index` (merged). Token strings of
    4 to 12 symbols from a random Markov chain (SMILES stand-ins) padded to 32, a GRU VAE (latent 16) with teacher
    forcing, the reconstruction cross-entropy plus 0.01 times the KL, Adam at 1e-3, batches of 32; the twin ignores the
    pad index. No statistic of a layer sees it: the loss falls, much of it on predicting pads. Measured over 6 epochs:
    75% of the positions are padding; the bug's loss falls from 1.39 to 0.59 (0.42 of its first; validation 0.59, three
    times lower than the twin's) while its reconstruction accuracy on the real tokens is 0.006 after the first epoch and
    0.32 after the sixth; the twin's loss falls from 2.61 to 1.94 (0.74 of its first; validation 1.95) at a real-token
    accuracy of 0.32 after the first epoch and 0.37 after the sixth"""
    x = _smiles_like()
    return Learner(tensor_dls(x, x, bs=32), _SeqVAE(), loss_func=_vae_loss(PAD if fixed else -100), metrics=_token_acc,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_AddKL()])
