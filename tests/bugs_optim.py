"""Bug zoo, family 3: optimisation, gradients, initialisation, architecture and the training loop. See `bugzoo.py`.

Each case is a public report, ported at small size with the fix its thread accepted as the twin. Several of these bugs
leave every per-layer statistic looking healthy (a network with no activation between its linear layers, a `view` that
mixes heads, embeddings that never train): their docstrings say so, and their `kinds` name the finding a correct tool
would raise, some of which the tool does not have yet."""
import math
from fastai.callback.core import Callback, CancelBatchException, CancelStepException
from fastai.callback.training import GradientAccumulation, GradientClip
from fastai.metrics import accuracy
from fastai.optimizer import SGD
from fastai.torch_core import find_bs
from bugzoo import *

# ---- what these ports share ----
def _gen(seed=0): return torch.Generator().manual_seed(seed)

def _glorot(model):
    "Initialise as Keras and TensorFlow do: Glorot-uniform kernels, zero biases"
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None: nn.init.zeros_(m.bias)
    return model

class _NoZeroGrad(Callback):
    "The report's training step never clears the gradients: the optimiser's `zero_grad` does nothing"
    order = -50
    def before_fit(self): self.learn.opt.opt.zero_grad = lambda set_to_none=True: None

def _seq_ce(out, y):
    "Cross-entropy over every position of `(batch, time, classes)` outputs and `(batch, time)` targets"
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

def _markov_text(n_tokens=24000, vocab=100, k=3, seed=0):
    "A token stream from a sparse Markov chain: each word is followed by one of `k` successors (weights 6:3:1), so it can be learnt"
    g = _gen(seed)
    succ = torch.stack([torch.randperm(vocab, generator=g)[:k] for _ in range(vocab)])
    p = torch.tensor([6., 3., 1.][:k])
    x = torch.empty(n_tokens, dtype=torch.long)
    x[0] = 0
    picks = torch.multinomial(p, n_tokens, replacement=True, generator=g)
    for i in range(1, n_tokens): x[i] = succ[x[i - 1], picks[i]]
    return x

def _lm_dls(stream, bptt=20, bs=20, seed=0):
    "Language-model batches: chunks of `bptt` tokens and the same chunks shifted by one"
    n = (len(stream) - 1) // bptt
    x = stream[:n * bptt].view(n, bptt)
    y = stream[1:n * bptt + 1].view(n, bptt)
    return tensor_dls(x, y, bs=bs, valid_pct=0.1, seed=seed)


# ---- the training loop ----
@case("https://github.com/fchollet/deep-learning-with-python-notebooks/issues/293",
      "the book's torch-backend `train_step` (chapter 7) never calls `zero_grad`: each step applies the sum of every gradient since the start",
      {'grads_not_zeroed', 'loss_diverging', 'exploding_grad'}, epochs=5, lr=1e-3)
def custom_train_step_without_zero_grad(fixed):
    """Chapter 7's `CustomModel.train_step` for the torch backend runs `loss.backward()` then `optimizer.apply(...)` and never
    clears `.grad` ('the results are terrible'); the fix calls `self.zero_grad()` in it. Ported: the chapter's `get_mnist_model`
    (Dense 512 relu, Dropout 0.5, Dense 10 softmax), rmsprop, sparse categorical cross-entropy; batches of 16 (Keras's
    32 on MNIST gave 5,600 steps; on digits, 16 gives 450). The gradient piles up all the same; under rmsprop the loss can
    still fall for these 450 steps, so what shows is the accumulation itself more than the loss"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Dropout(0.5), nn.Linear(512, 10), nn.Softmax(dim=1))
    return Learner(tensor_dls(x / 16, y, bs=16), _glorot(model), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.RMSprop, alpha=0.9, eps=1e-7), cbs=[] if fixed else [_NoZeroGrad()])


class _LayerAfterOptimizer(Callback):
    "The report made the optimiser before the layer: the layer trained is not the one the optimiser holds"
    order = -100
    def before_fit(self): self.learn.model[0] = nn.Linear(2, 1)    # fastai has already built the optimiser (`create_opt`)

@case("https://github.com/LaurentMazare/ocaml-torch/issues/36",
      "the optimiser is created before the linear layer is added to the model: it holds none of its weights, the loss never moves",
      {'optimizer_groups', 'frozen'}, layer='0', epochs=2, lr=1e-3)
def layer_created_after_optimizer(fixed):
    """The user's test made `Optimizer.sgd vs` and only then `Layer.linear vs` (2 -> 1) and fitted `ones -> 10` with MSE at
    lr 1e-3, batch size 1: the same loss printed 100 times. The fix creates the layer first. Ported with fastai, which builds
    the optimiser at `fit`: the layer is swapped in after it, as a layer made after `torch.optim.SGD(model.parameters())` is.
    The user's 100 steps are two epochs of 50 here"""
    pairs = [(torch.ones(2), torch.tensor([10.]))] * 50
    dls = DataLoaders(DataLoader(pairs, bs=1, shuffle=False), DataLoader(pairs[:10], bs=1))
    return Learner(dls, nn.Sequential(nn.Linear(2, 1)), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.SGD),
                   cbs=[] if fixed else [_LayerAfterOptimizer()])


class _SummedAccumulation(GradientAccumulation):
    "fastai's `GradientAccumulation` before the fix: the loss is not divided by the number of batches accumulated"
    def after_loss(self): pass
    def before_step(self):
        self.count += find_bs(self.learn.yb)
        if self.count < self.n_acc: raise CancelBatchException()
        self.count = 0

@case("https://github.com/fastai/fastai/issues/3023",
      "fastai's `GradientAccumulation` summed the gradients of the accumulated batches without dividing the loss: steps `n_acc/bs` times too large",
      {'lr_too_high', 'loss_diverging', 'exploding_grad'}, epochs=4, lr=0.3)
def gradient_accumulation_unscaled(fixed):
    """The callback added the gradients of every batch until `n_acc` samples were seen, so the step grew with `n_acc/bs` (the
    docs told users to lower the learning rate); the fix divides the loss by `n_acc/bs`, as fastai's callback does today.
    Ported: an MLP on digits, batches of 8 accumulated to 64, fastai's SGD with momentum at a learning rate for the mean"""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    acc = GradientAccumulation(n_acc=64) if fixed else _SummedAccumulation(n_acc=64)
    return Learner(digits_dls(bs=8), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=partial(SGD, mom=0.9),
                   cbs=[acc])


# ---- learning rate and optimiser settings ----
class _WordLM(nn.Module):
    "A word-level language model: embedding, LSTM, decoder"
    def __init__(self, vocab, emb, hid):
        super().__init__()
        self.encoder, self.rnn, self.decoder = nn.Embedding(vocab, emb), nn.LSTM(emb, hid, batch_first=True), nn.Linear(hid, vocab)
    def forward(self, x): return self.decoder(self.rnn(self.encoder(x))[0])

@case("https://github.com/rajveermalviya/language-modeling/issues/3",
      "the word-level LSTM language model trains with Adam at the learning rate 1.0 set in its config: the loss does not go down",
      {'lr_too_high', 'loss_diverging'}, epochs=2)
def adam_at_sgd_learning_rate(fixed):
    """'Adam's learning rate': the loss 'didn't really went down even after many epochs ... because you use learning rate of
    1.0 in the config file'; with Adam's default 0.001 'the training get much better', and the author updated the config.
    Ported: an LSTM language model, batches of 20 sequences of 20 tokens, on a synthetic Markov-chain text of 100 words"""
    model = _WordLM(100, 64, 128)
    return Learner(_lm_dls(_markov_text()), model, loss_func=_seq_ce, lr=1e-3 if fixed else 1.0,
                   opt_func=torch_opt(torch.optim.Adam))


def _reversal_pairs(n=2000, length=6, vocab=12, seed=0):
    "Sequences of digits (ids 2..vocab-1) and their reversal, the decoder's input being BOS (1) and the reversal shifted right"
    g = _gen(seed)
    src = torch.randint(2, vocab, (n, length), generator=g)
    tgt = src.flip(1)
    tgt_in = torch.cat([torch.ones(n, 1, dtype=torch.long), tgt[:, :-1]], 1)
    return src, tgt_in, tgt

class _Seq2Seq(nn.Module):
    "An LSTM encoder-decoder trained with teacher forcing: the encoder's final state starts the decoder"
    def __init__(self, vocab=12, emb=32, hid=64, layers=1, dropout=0.):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(vocab, emb), nn.Embedding(vocab, emb)
        self.encoder = nn.LSTM(emb, hid, layers, batch_first=True, dropout=dropout)
        self.decoder = nn.LSTM(emb, hid, layers, batch_first=True, dropout=dropout)
        self.drop, self.generator = nn.Dropout(dropout), nn.Linear(hid, vocab)
    def forward(self, src, tgt_in):
        _, state = self.encoder(self.drop(self.src_emb(src)))
        return self.generator(self.drop(self.decoder(self.drop(self.tgt_emb(tgt_in)), state)[0]))

def _seq2seq_dls(bs=32):
    "Reversal pairs as `(src, tgt_in), tgt` batches"
    src, tgt_in, tgt = _reversal_pairs()
    idx = torch.randperm(len(src), generator=_gen(0))
    n = len(src) // 5
    def items(i): return [(src[j], tgt_in[j], tgt[j]) for j in i.tolist()]
    train = DataLoader(items(idx[n:]), bs=bs, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    return DataLoaders(train, DataLoader(items(idx[:n]), bs=bs))

@case("https://github.com/mlpnlp/mlpnlp-nmt/pull/4",
      "the NMT script's Adam had `eps=0.1` by default (Chainer's is 1e-8): the steps shrink to almost nothing and training does not work well",
      {'lr_too_low', 'loss_stalled'}, epochs=4, lr=1e-3)
def adam_eps_too_large(fixed):
    """The merged fix sets the Adam optimiser's eps back to 1e-8 ('the training does not work well when using eps=0.1'). With
    eps=0.1 each step is about lr·g/0.1 instead of lr·sign(g): for gradients far below 0.1 the learning rate is in effect
    divided by 0.1/|g|. Ported: an LSTM encoder-decoder (the script's attention left out) on a reversal task, Adam at 1e-3,
    batches of 32"""
    return Learner(_seq2seq_dls(), _Seq2Seq(), loss_func=_seq_ce, opt_func=torch_opt(torch.optim.Adam, eps=1e-8 if fixed else 0.1))

@case("https://github.com/OpenNMT/OpenNMT-py/issues/805",
      "`-optim adam` with OpenNMT-py's default `-learning_rate 1` (meant for SGD): the perplexity stays at a high constant value",
      {'lr_too_high', 'loss_diverging', 'loss_stalled'}, epochs=4)
def adam_with_sgd_default_learning_rate(fixed):
    """The user trained the quick-start demo with `-optim adam` and kept the default learning rate of 1; the answer: set
    `-learning_rate 0.001` for Adam. Ported: the default model's shape at small size (2-layer LSTM encoder and decoder,
    dropout 0.3, gradient norm clipped at 5; attention left out; batches of 32, not 64) on a reversal task"""
    return Learner(_seq2seq_dls(), _Seq2Seq(layers=2, dropout=0.3), loss_func=_seq_ce, lr=1e-3 if fixed else 1.0,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[GradientClip(5.)])

class _MomentumSGDTrainer(Callback):
    "DyNet's `MomentumSGDTrainer(m, e0, mom, edecay)`: the learning rate `e0/(1 + edecay·epoch)` after each `update_epoch`"
    def __init__(self, e0, mom, edecay): self.e0, self.mom, self.edecay = e0, mom, edecay
    def before_epoch(self): self.opt.set_hypers(lr=self.e0 / (1 + self.edecay * self.epoch), mom=self.mom)

@case("https://github.com/clab/dynet/issues/138",
      "`MomentumSGDTrainer` called with cnn's argument order (λ, e0, momentum) under DyNet's (e0, momentum, edecay): learning rate 1e-6, momentum 0.01",
      {'lr_too_low', 'loss_stalled'}, epochs=4)
def momentum_trainer_arguments_shifted(fixed):
    """cnn's `MomentumSGDTrainer(m, lam=1e-6, e0=0.01, mom=0.9)` became DyNet's `MomentumSGDTrainer(m, e0=0.01, mom=0.9,
    edecay=0.0)`; the user's call in the old order 'behaved weirdly' until he found it. The three values (1e-6, 0.01, 0.9) set a
    learning rate of 1e-6, momentum 0.01 and a decay of 0.9 per epoch; the twin passes e0=0.01, mom=0.9. The user's model is not
    in the report: an MLP on digits stands in, with batches of 8 (DyNet's programs usually update per example)"""
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 10))
    trainer = _MomentumSGDTrainer(0.01, 0.9, 0.) if fixed else _MomentumSGDTrainer(1e-6, 0.01, 0.9)
    return Learner(digits_dls(bs=8), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=SGD, cbs=[trainer])


class _HalfBert(nn.Module):
    "A Hugging Face `BertForSequenceClassification` returning its logits (the Trainer's loss takes them from the output)"
    def __init__(self, half):
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification
        cfg = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=32, num_labels=2)
        self.bert = BertForSequenceClassification(cfg)
        if half: self.bert = self.bert.to(torch.float16)
    def forward(self, x): return self.bert(input_ids=x).logits

def _sentiment_tokens(n=1200, length=16, vocab=200, seed=0):
    "Token sequences whose label is whether 'positive' words (ids 10..29) outnumber 'negative' ones (30..49)"
    g = _gen(seed)
    x = torch.randint(50, vocab, (n, length), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    for i in range(n):
        pos = torch.randperm(length, generator=g)[:3]
        x[i, pos] = torch.randint(10, 30, (3,), generator=g) + (0 if y[i] else 20)
    return x, y

@case("https://github.com/ageron/handson-mlp/issues/36",
      "BERT loaded with `dtype=torch.float16` and fine-tuned by the Trainer: the weights and AdamW's state are float16, the loss turns to NaN",
      {'nonfinite', 'nonfinite_loss'}, epochs=3, lr=1e-3)
def float16_weights_under_adamw(fixed):
    """Chapter 14's notebook loaded `bert-base-uncased` in float16 and trained it with the Trainer: validation loss nan,
    accuracy 40-50%. Pure float16 weights under AdamW (its eps of 1e-8 is 0 in float16, squared gradients underflow) give
    NaN; the fix loads the model in float32 (and asks the Trainer for mixed precision, a GPU feature left out here). Ported:
    a 2-layer BERT of width 32 with random weights on a synthetic sentiment task, AdamW at 1e-3 (not 5e-5: no pretraining)"""
    x, y = _sentiment_tokens()
    def loss(logits, y): return F.cross_entropy(logits, y).float()    # computed in the model's dtype, as BERT's own loss; float for fastai's log
    return Learner(tensor_dls(x, y, bs=32), _HalfBert(half=not fixed), loss_func=loss, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.AdamW))


# ---- gradients cut, graphs broken ----
class _DenoiseDNN(nn.Module):
    "A DiffRec-style denoiser: a time embedding, then `in_layers` and `out_layers` with tanh between them; `detach` as the report's code"
    def __init__(self, n_items=60, hid=200, emb=10, detach=True):
        super().__init__()
        self.emb_layer = nn.Linear(emb, emb)
        self.in_layers = nn.ModuleList([nn.Linear(n_items + emb, hid)])
        self.out_layers = nn.ModuleList([nn.Linear(hid, hid), nn.Linear(hid, n_items)])
        self.detach, self.emb = detach, emb
        self.register_buffer('alpha_bar', torch.tensor([0.9, 0.7, 0.5, 0.3, 0.1]))
    def forward(self, x0):
        t = torch.randint(0, 5, (len(x0),), device=x0.device)
        ab = self.alpha_bar[t].unsqueeze(1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * torch.randn_like(x0)     # the forward diffusion at a random step
        h = torch.cat([xt, self.emb_layer(F.one_hot(t, self.emb).float())], 1)
        for layer in self.in_layers:
            h = torch.tanh(layer(h))
            if self.detach: h = h.detach()
        for i, layer in enumerate(self.out_layers):
            h = layer(h)
            if i != len(self.out_layers) - 1:
                h = torch.tanh(h)
                if self.detach: h = h.detach()
        return h

def _interactions(n_users=1500, n_items=60, seed=0):
    "Implicit feedback: users of 4 tastes, each liking 15 items with chance 0.6, and any other with chance 0.03"
    g = _gen(seed)
    taste = torch.randint(0, 4, (n_users,), generator=g)
    p = torch.full((n_users, n_items), 0.03)
    for k in range(4): p[taste == k, 15 * k:15 * (k + 1)] = 0.6
    return torch.bernoulli(p, generator=g)

@case("https://github.com/user683/DRGO/issues/1",
      "the denoising MLP calls `h.detach()` after each of its layers: only the last layer gets a gradient, the others never train",
      {'gradient_flow', 'frozen'}, epochs=4, lr=1e-3)
def detach_in_every_layer(fixed):
    """DRGO's `MLP_model.py` denoiser had `h.detach()` in each linear layer, left in from debugging; the author: it 'should be
    `h = torch.tanh(h)`'. Ported: a DiffRec-style denoiser (time embedding, tanh layers) predicting the clean interaction
    vector from one diffused at a random step, MSE, Adam at 1e-3, on synthetic implicit feedback"""
    x = _interactions()
    return Learner(tensor_dls(x, x, bs=64), _DenoiseDNN(detach=not fixed), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam))


class _DwsConv(nn.Module):
    "osmr's `DwsConvBlock`: ReLU (`inplace=True` in the report), a depthwise-separable convolution, BatchNorm"
    def __init__(self, ni, nf, inplace):
        super().__init__()
        self.activ = nn.ReLU(inplace=inplace)
        self.conv = nn.Sequential(nn.Conv2d(ni, ni, 3, padding=1, groups=ni, bias=False), nn.Conv2d(ni, nf, 1, bias=False))
        self.bn = nn.BatchNorm2d(nf)
    def forward(self, x): return self.bn(self.conv(self.activ(x)))

class _XceptionUnit(nn.Module):
    "osmr's `XceptionUnit`: a 1×1 convolution on the identity, and a body of separable blocks starting with a ReLU"
    def __init__(self, ni, nf, inplace):
        super().__init__()
        self.identity_conv = nn.Sequential(nn.Conv2d(ni, nf, 1, stride=2, bias=False), nn.BatchNorm2d(nf))
        self.body = nn.Sequential(_DwsConv(ni, nf, inplace), _DwsConv(nf, nf, inplace), nn.MaxPool2d(3, stride=2, padding=1))
    def forward(self, x):
        identity = self.identity_conv(x)     # saves `x` for its backward ...
        return self.body(x) + identity        # ... which the body's first in-place ReLU overwrites

@case("https://github.com/osmr/imgclsmob/issues/13",
      "Xception's blocks start with `nn.ReLU(inplace=True)` on a tensor the identity convolution saved: backward fails ('modified by an inplace operation')",
      {'gradient_flow'}, layer='1.body.0.activ', epochs=3, lr=1e-3)
def inplace_relu_on_saved_input(fixed):
    """The user trained imgclsmob's Xception: `RuntimeError: one of the variables needed for gradient computation has been
    modified by an inplace operation` at `loss.backward()`; removing `inplace=True` fixes it (closed as a bug). Ported: a
    stem and one Xception unit at small width on digits. The program stops at its first backward, as the user's did; a correct
    tool names the in-place ReLU (`gradient_flow` is the closest kind it has)"""
    model = nn.Sequential(nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()),
                          _XceptionUnit(16, 32, inplace=not fixed), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    return Learner(digits_dls(bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))

class _BiGRUVAE(nn.Module):
    "Sentence-VAE at small size: a bidirectional GRU encoder, a Gaussian latent, a bidirectional GRU decoder fed the shifted sentence"
    def __init__(self, vocab=50, emb=32, hid=64, latent=8, fixed=True):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.encoder_rnn = nn.GRU(emb, hid, batch_first=True, bidirectional=True)
        self.decoder_rnn = nn.GRU(emb, hid, batch_first=True, bidirectional=True)
        self.hidden2mean, self.hidden2logv = nn.Linear(2 * hid, latent), nn.Linear(2 * hid, latent)
        self.latent2hidden, self.outputs2vocab = nn.Linear(latent, 2 * hid), nn.Linear(2 * hid, vocab)
        self.hid, self.fixed = hid, fixed
    def forward(self, x):
        b = len(x)
        _, hidden = self.encoder_rnn(self.embedding(x))                       # (2, batch, hid)
        hidden = hidden.transpose(0, 1).reshape(b, 2 * self.hid) if self.fixed else hidden.view(b, 2 * self.hid)
        mean, logv = self.hidden2mean(hidden), self.hidden2logv(hidden)
        z = mean + torch.randn_like(mean) * torch.exp(0.5 * logv) if self.training else mean
        hidden = self.latent2hidden(z)
        hidden = hidden.view(b, 2, self.hid).transpose(0, 1).contiguous() if self.fixed else hidden.view(2, b, self.hid)
        inp = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)           # <sos> (id 0) and the sentence shifted right
        out, _ = self.decoder_rnn(self.embedding(inp), hidden)
        return F.log_softmax(self.outputs2vocab(out), -1), mean, logv

def _vae_loss(out, y, kl_weight=0.0025):
    "Sentence-VAE's loss: the NLL summed over words plus the annealed KL weight times the KL term, over the batch size"
    logp, mean, logv = out
    nll = F.nll_loss(logp.reshape(-1, logp.shape[-1]), y.reshape(-1), reduction='sum')
    kl = -0.5 * torch.sum(1 + logv - mean.pow(2) - logv.exp())
    return (nll + kl_weight * kl) / len(y)

@case("https://github.com/timbmg/Sentence-VAE/issues/15",
      "the bidirectional encoder's hidden state `(2, batch, hidden)` is `view`ed as `(batch, 2·hidden)`: each sentence's code mixes two sentences' states",
      {'batch_independence'}, epochs=3, lr=1e-3)
def bidirectional_hidden_view_mixes_batch(fixed):
    """`hidden.view(batch_size, hidden_size*hidden_factor)` on the GRU's `(num_layers*2, batch, hidden)` state puts sentence
    i's forward state beside sentence i+1's (and the decoder's `view(hidden_factor, batch_size, hidden_size)` does the same in
    reverse); the issue shows it with a small tensor and the fix it agrees on takes the layers out of dim 0 first. The code
    runs without error. Ported with `-bi` (bidirectional), Adam at 1e-3, batches of 32, the KL weight at its early annealed
    value, on synthetic Markov-chain sentences of 12 words"""
    x = _markov_text(n_tokens=12 * 1500, vocab=49).view(1500, 12) + 1       # word ids 1..49; 0 is <sos>
    return Learner(tensor_dls(x, x, bs=32), _BiGRUVAE(fixed=fixed), loss_func=_vae_loss, opt_func=torch_opt(torch.optim.Adam))


# ---- architecture and initialisation ----
@case("https://github.com/aymericdamien/TensorFlow-Examples/issues/207",
      "the raw-TensorFlow MLP stacks three matrix products with no activation between them: the network is one linear map",
      {'linear_stack'}, epochs=10)
def mlp_without_nonlinearity(fixed):
    """`neural_network_raw`: two hidden layers of 256 units as `tf.add(tf.matmul(x, w), b)` with no nonlinearity, weights and
    biases from `tf.random_normal`, Adam at 0.1, batches of 128 ('isn't a network without activation the same as a linear
    function?'); the twin adds a ReLU after each hidden layer, as the pull request #327 proposes. No per-layer statistic
    sees it: every layer learns; `linear_stack` is a finding the tool does not have. 110 steps instead of 500"""
    x, y = digits_raw()
    layers = [nn.Linear(64, 256), nn.Linear(256, 256), nn.Linear(256, 10)]
    for l in layers: nn.init.normal_(l.weight); nn.init.normal_(l.bias)
    model = nn.Sequential(layers[0], *([nn.ReLU()] if fixed else []), layers[1], *([nn.ReLU()] if fixed else []), layers[2])
    return Learner(tensor_dls(x / 16, y, bs=128), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy, lr=0.1,
                   opt_func=torch_opt(torch.optim.Adam))


class _TfBatchNorm(nn.Module):
    "`tf.contrib.layers.batch_norm` with its defaults: centred (a learnt shift), not scaled, batch statistics, eps 1e-3"
    def __init__(self, n):
        super().__init__()
        self.bn, self.beta = nn.BatchNorm1d(n, affine=False, eps=1e-3, momentum=1e-3), nn.Parameter(torch.zeros(n))
    def forward(self, x): return self.bn(x) + self.beta

def _tag_vectors(dim=32, seed=0):
    "Image features and their targets as regress2sum makes them: unit-norm features, the normalised sum of the tags' word vectors"
    g = _gen(seed)
    x, y = digits_raw()
    words = F.normalize(torch.randn(16, dim, generator=g), dim=1)       # 10 digit words, 'even'/'odd', 4 stroke words
    tags = torch.stack([y, 10 + y % 2, 12 + y % 4], 1)
    return F.normalize(x, dim=1), F.normalize(words[tags].sum(1), dim=1)

@case("https://github.com/Lab41/attalos/pull/89",
      "regress2sum's last layer is a ReLU then a batch norm: outputs with unit variance per dimension for targets a tenth of that",
      {'output_activation', 'target_range'}, layer='5', epochs=4, lr=1e-3)
def batchnorm_on_regression_output(fixed):
    """`construct_model` applied `tf.contrib.layers.relu` then `batch_norm` to every layer, the prediction included, and
    regressed the normalised sum of the tags' word vectors (per-dimension scale about 1/√dim) under a summed squared error with Adam
    at 0.001; the merged bugfix: 'the last layer of the network should be linear and not include batch normalization'.
    Ported at hidden sizes (128, 32) on digits with synthetic word vectors"""
    x, t = _tag_vectors()
    head = [nn.Linear(128, 32)] if fixed else [nn.Linear(128, 32), nn.ReLU(), _TfBatchNorm(32)]
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), _TfBatchNorm(128), *head)
    return Learner(tensor_dls(x, t, bs=128), model, loss_func=lambda p, t: ((p - t) ** 2).sum(), opt_func=torch_opt(torch.optim.Adam))


class _WindowNER(nn.Module):
    "The assignment's window model: the window's word embeddings concatenated, a ReLU layer, dropout, the class scores"
    def __init__(self, pretrained, trainable, window=3, hid=200, n_classes=5):
        super().__init__()
        if trainable: self.embeddings = nn.Parameter(pretrained.clone())
        else: self.register_buffer('embeddings', pretrained.clone())      # `embeddings=self.pretrained_embeddings`: a constant
        self.hidden, self.drop = nn.Linear(window * pretrained.shape[1], hid), nn.Dropout(0.5)
        self.out = nn.Linear(hid, n_classes)
    def forward(self, x): return self.out(self.drop(F.relu(self.hidden(F.embedding(x, self.embeddings).flatten(1)))))

def _ner_windows(n=3000, vocab=400, dim=50, n_classes=5, signal=0.3, seed=0):
    "Windows of 3 word ids labelled with the centre word's entity class, and 'pretrained' vectors that carry that class (weakly)"
    g = _gen(seed)
    cls = torch.randint(0, n_classes, (vocab,), generator=g)
    centroids = torch.randn(n_classes, dim, generator=g)
    vectors = signal * centroids[cls] + torch.randn(vocab, dim, generator=g)
    x = torch.randint(0, vocab, (n, 3), generator=g)
    return x, cls[x[:, 1]], vectors

@case("https://github.com/roypan/CS224n/issues/1",
      "the NER models look their pretrained word vectors up in a constant, not a variable: the embeddings never train and the models underperform",
      {'frozen'}, epochs=4, lr=1e-3)
def pretrained_embeddings_never_trained(fixed):
    """Assignment 3's window and RNN models did `embeddings = self.pretrained_embeddings`; the reply: the word embeddings do not
    get updated, `tf.Variable(self.pretrained_embeddings)` solves it, 'the accuracy gain is more than 10%', and the author
    agreed. Ported: the window model (window of 3, 50-d vectors, 200 hidden, dropout 0.5, Adam at 1e-3; the casing features
    left out) on synthetic windows.
    A constant is no parameter: no per-layer statistic of parameters sees it, and a frozen embedding is often meant"""
    x, y, vectors = _ner_windows()
    return Learner(tensor_dls(x, y, bs=64), _WindowNER(vectors, trainable=fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


class _PretrainedWindow(nn.Module):
    "A window classifier over word embeddings meant to start from pretrained vectors and stay frozen (`freeze=True`)"
    def __init__(self, pretrained, load, hid=100, n_classes=5):
        super().__init__()
        self.embedding = nn.Embedding(*pretrained.shape)
        if load: self.embedding = nn.Embedding.from_pretrained(pretrained, freeze=True)
        else: self.embedding.from_pretrained(pretrained, freeze=True)   # the report's line: a classmethod, its result dropped
        self.hidden, self.out = nn.Linear(3 * pretrained.shape[1], hid), nn.Linear(hid, n_classes)
    def forward(self, x): return self.out(F.relu(self.hidden(self.embedding(x).flatten(1))))

@case("https://github.com/fenchri/edge-oriented-graph/issues/12",
      "`self.embedding.from_pretrained(pret_embeds, freeze=...)` is a classmethod whose result is dropped: the pretrained vectors are never loaded",
      {'pretrained_not_loaded'}, epochs=3, lr=1e-3)
def pretrained_embeddings_never_loaded(fixed):
    """EoG's `modules.py` called `from_pretrained` on an existing `nn.Embedding`, which builds a new layer and leaves the old one
    randomly initialised and trainable; the author confirmed ('only randomly initialized embedding is used') and noted that
    loading them with `freeze` gives the better results, the twin. The model trains either way: no statistic of the run tells
    random vectors from pretrained ones, and `pretrained_not_loaded` is a finding the tool does not have. Ported: the
    embedding's path only (EoG's graph layers left out), a window classifier, Adam at 1e-3, vectors that carry the classes"""
    x, y, vectors = _ner_windows(signal=1.0)
    return Learner(tensor_dls(x, y, bs=64), _PretrainedWindow(vectors, load=fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

class _AttentionLayer(nn.Module):
    "Informer's `AttentionLayer` with full attention: projections to `(B, L, H, d)`, then the attention's own reshape to `(B, H, L, d)`"
    def __init__(self, d_model=32, n_heads=4, fixed=True):
        super().__init__()
        self.query_projection, self.key_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.value_projection, self.out_projection = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.h, self.fixed = n_heads, fixed
    def heads(self, t):
        B, L, _ = t.shape
        t = t.view(B, L, self.h, -1)
        return t.transpose(2, 1) if self.fixed else t.view(B, self.h, L, -1)   # the report: `queries.view(B, H, L_Q, -1)`
    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.heads(self.query_projection(x)), self.heads(self.key_projection(x)), self.heads(self.value_projection(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
        return self.out_projection(a.transpose(2, 1).reshape(B, L, -1))

class _Forecaster(nn.Module):
    "One Informer encoder layer (attention and a GELU feed-forward, each with a residual and LayerNorm) and a linear head"
    def __init__(self, seq=48, pred=12, d_model=32, fixed=True):
        super().__init__()
        self.value_embedding = nn.Linear(1, d_model)
        pos = torch.arange(seq).unsqueeze(1) * torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.) / d_model))
        self.register_buffer('pe', torch.cat([torch.sin(pos), torch.cos(pos)], 1))
        self.attention, self.norm1 = _AttentionLayer(d_model, fixed=fixed), nn.LayerNorm(d_model)
        self.ff, self.norm2 = nn.Sequential(nn.Linear(d_model, 64), nn.GELU(), nn.Linear(64, d_model)), nn.LayerNorm(d_model)
        self.head = nn.Linear(seq * d_model, pred)
    def forward(self, x):
        h = self.value_embedding(x.unsqueeze(-1)) + self.pe
        h = self.norm1(h + self.attention(h))
        h = self.norm2(h + self.ff(h))
        return self.head(h.flatten(1))

def _series(n=2000, seq=48, pred=12, seed=0):
    "Windows of noisy sums of two sinusoids (random periods and phases) and the next `pred` values"
    g = _gen(seed)
    t = torch.arange(seq + pred).float()
    per = 8 + 24 * torch.rand(n, 2, 1, generator=g)
    ph = 2 * math.pi * torch.rand(n, 2, 1, generator=g)
    s = torch.sin(2 * math.pi * t / per + ph).sum(1) + 0.1 * torch.randn(n, seq + pred, generator=g)
    return s[:, :seq], s[:, seq:]

@case("https://github.com/zhouhaoyi/Informer2020/issues/59",
      "the attention reshapes `(B, L, H, d)` queries, keys and values with `.view(B, H, L, -1)` instead of a transpose: positions and heads are scrambled",
      {'axes_mixed'}, epochs=3, lr=1e-3)
def attention_heads_view_not_transpose(fixed):
    """`ProbAttention.forward` did `queries.view(B, H, L_Q, -1)` (keys, values alike) on tensors laid out `(B, L, H, D)`; 'does
    view not break the relationship between heads?', and the authors: 'We will fix this error immediately'. The model runs and
    learns something: no per-layer statistic can see it, and `axes_mixed` is a finding the tool does not have. Ported: one
    encoder layer (full attention in place of ProbAttention, no distilling, a linear head in place of the decoder), 4 heads of 8,
    forecasting 12 steps from 48 of synthetic sinusoids, MSE, Adam at 1e-3 (Informer's 1e-4 is too slow for this budget)"""
    x, y = _series()
    return Learner(tensor_dls(x, y, bs=32), _Forecaster(fixed=fixed), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam))


class _DLRM(nn.Module):
    "DLRM at small size: a bottom MLP on dense features, embedding tables, pairwise dot interactions, a top MLP (ReLU after each layer)"
    def __init__(self, n_dense=13, tables=(50, 50, 50), d=16):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(n_dense, 64), nn.ReLU(), nn.Linear(64, d), nn.ReLU())
        self.emb = nn.ModuleList([nn.Embedding(n, d) for n in tables])
        n_vec = len(tables) + 1
        self.top = nn.Sequential(nn.Linear(d + n_vec * (n_vec - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1), nn.ReLU())
    def forward(self, dense, sparse):
        v = torch.stack([self.bot(dense)] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], 1)
        z = v @ v.transpose(1, 2)
        i, j = torch.triu_indices(v.shape[1], v.shape[1], 1)
        return self.top(torch.cat([v[:, 0], z[:, i, j]], 1))

def _dlrm_init(model, zero_bias, seed=0):
    "DLRM's `create_mlp`: W ~ N(0, sqrt(2/(m+n))), b ~ N(0, sqrt(1/m)) (m outputs; the PR: zero biases, as Xavier's scheme has)"
    g = _gen(seed)
    for l in [m for m in model.modules() if isinstance(m, nn.Linear)]:
        m, n = l.weight.shape
        with torch.no_grad():
            l.weight.copy_(torch.randn(m, n, generator=g) * math.sqrt(2 / (m + n)))
            l.bias.copy_(torch.zeros(m) if zero_bias else torch.randn(m, generator=g) * math.sqrt(1 / m))
    return model

def _clicks(n=4000, n_dense=13, tables=(50, 50, 50), seed=0):
    "Click data: dense features, categorical ids, and clicks drawn from a logistic model of both (about one in four clicked)"
    g = _gen(seed)
    dense = torch.randn(n, n_dense, generator=g)
    sparse = torch.stack([torch.randint(0, t, (n,), generator=g) for t in tables], 1)
    w, effect = torch.randn(n_dense, generator=g) * 0.5, torch.randn(len(tables), max(tables), generator=g)
    logit = dense @ w + sum(effect[i, sparse[:, i]] for i in range(len(tables))) - 1.2
    return dense, sparse, torch.bernoulli(torch.sigmoid(logit), generator=g).unsqueeze(1)

@case("https://github.com/pytorch/benchmark/pull/1927",
      "DLRM draws its biases from N(0, 1/m): the top MLP's single output unit got a large negative bias, its ReLU outputs 0 for every sample and no gradient flows",
      {'dead', 'constant_output', 'gradient_flow'}, epochs=3, lr=0.1)
def output_relu_dead_from_bias_init(fixed):
    """The PR shows the benchmark's DLRM in training: every prediction `0.` out of a ReLU and the first linear layer's
    derivative all zeros, and after its change, which initialises biases to zero, non-zero ones (closed unmerged: the code
    comes from upstream, where facebookresearch/dlrm#358 proposes the same). The
    output layer has one unit, so its bias is drawn from N(0, 1): here the draw is -3, as one that silences every sample
    must be. Ported: DLRM's default MSE loss, plain SGD at 0.1 (the PR does not give the benchmark's rate), at small size (13 dense
    features, 3 tables of 50, dimension 16), batches of 32"""
    dense, sparse, y = _clicks()
    model = _dlrm_init(_DLRM(), zero_bias=fixed)
    if not fixed:
        with torch.no_grad(): model.top[2].bias.fill_(-3.)
    idx = torch.randperm(len(y), generator=_gen(0))
    def items(i): return [(dense[j], sparse[j], y[j]) for j in i.tolist()]
    train = DataLoader(items(idx[800:]), bs=32, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    return Learner(DataLoaders(train, DataLoader(items(idx[:800]), bs=32)), model, loss_func=F.mse_loss,
                   opt_func=torch_opt(torch.optim.SGD))


class _FeedForward(nn.Module):
    "mlcolvar's `FeedForward`: hidden blocks `Linear → activation → dropout → batchnorm` (the report), or `Linear → batchnorm → activation → dropout`"
    def __init__(self, layers=(20, 64, 64, 1), dropout=0.2, fixed=True):
        super().__init__()
        blocks = []
        for i, (ni, nf) in enumerate(zip(layers[:-1], layers[1:])):
            blocks.append(nn.Linear(ni, nf))
            if i < len(layers) - 2:
                blocks += ([nn.BatchNorm1d(nf), nn.ReLU(), nn.Dropout(dropout)] if fixed else [nn.ReLU(), nn.Dropout(dropout), nn.BatchNorm1d(nf)])
        self.nn = nn.Sequential(*blocks)
    def forward(self, x): return self.nn(x)

def _descriptors(n=2000, d=20, seed=0):
    "Descriptors of configurations and a collective variable to regress: a smooth nonlinear function of a few of them"
    g = _gen(seed)
    x = torch.randn(n, d, generator=g)
    return x, (torch.tanh(x[:, 0] * x[:, 1]) + 0.5 * torch.sin(2 * x[:, 2]) + 0.3 * x[:, 3] ** 2).unsqueeze(1)

@case("https://github.com/luigibonati/mlcolvar/issues/267",
      "the feed-forward blocks run `Linear → activation → dropout → BatchNorm`: the norm follows the dropout and sees its noise, training is less stable",
      {'norm_placement'}, epochs=4, lr=1e-3)
def batchnorm_after_dropout(fixed):
    """The issue: the ordering 'may distort the feature statistics ... especially for small batch sizes', and 'the current
    ordering leads to noticeably worse training stability and performance'; closed by PR #268, which orders blocks `Linear →
    BatchNorm → activation → dropout`. Nothing per layer is abnormal: `norm_placement` is a finding the tool does not have.
    Ported: layers (20, 64, 64, 1), dropout 0.2, small batches of 16, MSE, Adam at 1e-3, on a synthetic collective variable"""
    x, y = _descriptors()
    return Learner(tensor_dls(x, y, bs=16), _FeedForward(fixed=fixed), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam))


class _TinyDispNet(nn.Module):
    "DispNet's shape at small size: a strided convolutional encoder, a transposed-convolution decoder, a sigmoid disparity"
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))
    def forward(self, x): return torch.sigmoid(self.decoder(self.encoder(x)))

def _smooth_maps():
    "Digits and a smooth map made from each (a blurred copy in [0, 1]), standing in for a disparity to regress"
    x, _ = digits_raw()
    x = x.view(-1, 1, 8, 8) / 16
    k = torch.tensor([[1., 2., 1.], [2., 4., 2.], [1., 2., 1.]]).view(1, 1, 3, 3) / 16
    return x, F.conv2d(x, k, padding=1).clamp(0, 1)

@case("https://github.com/tinghuiz/SfMLearner/issues/34",
      "a PyTorch port took SfMLearner's weight decay of 0.05 (which TF-slim never applied there) into Adam: the networks 'just go to zero very quickly'",
      {'wd_too_high'}, epochs=4, lr=1e-3)
def weight_decay_far_too_large(fixed):
    """SfMLearner's `nets.py` set a weight decay of 0.05 through `slim`, which only adds it to a loss collection the training
    never read; its PyTorch port with that value saw both networks go to zero, and the author agreed the decay was never
    applied (so 0 reproduces the original, the twin). Ported: Adam at 1e-3 with `weight_decay=0.05` (an L2 term in its gradient) on a
    DispNet-shaped network regressing smooth maps from digits (the photometric self-supervision left out). No kind the
    tool has names weight decay: `wd_too_high` is assumed"""
    x, t = _smooth_maps()
    return Learner(tensor_dls(x, t, bs=32), _TinyDispNet(), loss_func=F.mse_loss,
                   opt_func=torch_opt(torch.optim.Adam, weight_decay=0. if fixed else 0.05))


class _SchedulerInsteadOfStep(Callback):
    "The report's loop: `if scheduler: scheduler.step()` `else: optimizer.step()`, so with a scheduler the optimiser never steps"
    order = -50
    def __init__(self, step_size=1, gamma=0.1): self.step_size, self.gamma, self.n = step_size, gamma, 0
    def before_step(self):
        self.n += 1
        if self.n % self.step_size == 0: self.opt.set_hyper('lr', self.opt.hypers[0]['lr'] * self.gamma)
        raise CancelStepException()

@case("https://github.com/ClementPinard/SfmLearner-Pytorch/issues/5",
      "with a learning-rate scheduler, the training loop calls `scheduler.step()` in place of `optimizer.step()`: no weight ever changes",
      {'frozen'}, epochs=4, lr=2e-4)
def scheduler_step_instead_of_optimizer_step(fixed):
    """The user added a `--scheduler step` option and 'the loss doesn't come down'; the author: `scheduler.step()` only changes
    the learning rate and does not perform the optimiser's step, so call `optimizer.step()` regardless, which worked. Every
    parameter gets its gradient and none moves. Ported: Adam at 2e-4 and batches of 48 as the user's command, a DispNet-shaped
    network regressing smooth maps from digits (SfMLearner's photometric self-supervision and pose network left out)"""
    x, t = _smooth_maps()
    return Learner(tensor_dls(x, t, bs=48), _TinyDispNet(), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam),
                   cbs=[] if fixed else [_SchedulerInsteadOfStep(step_size=10)])


class _StepLRPerBatch(Callback):
    "`StepLR(step_size=epochs // 2, gamma=0.1)` stepped after every batch (the report) or after every epoch (the fix)"
    def __init__(self, step_size, per_batch, gamma=0.1): self.step_size, self.per_batch, self.gamma, self.n = step_size, per_batch, gamma, 0
    def _step(self):
        self.n += 1
        if self.n % self.step_size == 0: self.opt.set_hyper('lr', self.opt.hypers[0]['lr'] * self.gamma)
    def after_step(self):
        if self.per_batch: self._step()
    def after_epoch(self):
        if not self.per_batch: self._step()

class _SRNet(nn.Module):
    "SRResNet's shape at small size: a 9×9 head, residual blocks with BatchNorm and PReLU, a sub-pixel ×2 upsampler, a 9×9 tail"
    def __init__(self, nf=32, n_blocks=2):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(1, nf, 9, padding=4), nn.PReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Conv2d(nf, nf, 3, padding=1), nn.BatchNorm2d(nf), nn.PReLU(),
                                                   nn.Conv2d(nf, nf, 3, padding=1), nn.BatchNorm2d(nf)) for _ in range(n_blocks)])
        self.up = nn.Sequential(nn.Conv2d(nf, 4 * nf, 3, padding=1), nn.PixelShuffle(2), nn.PReLU())
        self.tail = nn.Conv2d(nf, 1, 9, padding=4)
    def forward(self, x):
        h = self.head(x)
        r = h
        for b in self.blocks: r = r + b(r)
        return self.tail(self.up(r + h))

@case("https://github.com/Lornatang/SRGAN-PyTorch/issues/1",
      "`StepLR(step_size=epochs // 2, gamma=0.1)` is stepped after every training step, not every epoch: the learning rate is ~0 after a few steps",
      {'lr_too_low', 'loss_stalled'}, epochs=4, lr=1e-3)
def step_lr_stepped_every_batch(fixed):
    """`train.py` called `schedulerD.step()` and `schedulerG.step()` in the batch loop, so with `step_size=epochs // 2` the
    rate fell tenfold every few steps and 'the SRGAN does not seem to train'; moved to the end of the epoch it trained, and the
    author: 'I found it. I will fix it.' Ported: the generator's MSE training only (the discriminator left out), an SRResNet
    of two blocks upscaling 4×4 digits to 8×8, Adam at 1e-3"""
    x, _ = digits_raw()
    hr = x.view(-1, 1, 8, 8) / 16
    lr_img = F.avg_pool2d(hr, 2)
    return Learner(tensor_dls(lr_img, hr, bs=32), _SRNet(), loss_func=F.mse_loss, opt_func=torch_opt(torch.optim.Adam),
                   cbs=[_StepLRPerBatch(step_size=4 // 2, per_batch=not fixed)])
