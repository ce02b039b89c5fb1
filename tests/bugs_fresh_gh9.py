"""Bug zoo, a ninth family from GitHub threads of the PyTorch ecosystem's libraries (PEFT, skorch, DGL) where the user's
training code, or the library's own example, was at fault and the maintainers named the bug; threads no other family
cites. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever
run under the tool. Cases were chosen for how common the bug is and for the kinds the zoo holds few of (a saved LoRA
adapter loaded for more training in PEFT's default inference mode, so that nothing is trainable; a module ending in
`LogSoftmax` under skorch's classifier, which takes the log of the output again; graphs stored sorted by label and fed
without shuffling; a functional dropout that stays on when the network is evaluated), never for whether the tool
catches it. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its
thread's symptom, and its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_fresh import _gen


# ---- frozen: a LoRA adapter loaded in inference mode ----
class _LoRA(nn.Module):
    "PEFT's LoRA on a linear layer: `base(x) + B A x · alpha/r`; the base frozen, `A` and `B` as the adapter was saved"
    def __init__(self, base, r=8, alpha=16, seed=0):
        super().__init__()
        self.base, self.scale = base.requires_grad_(False), alpha / r
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features, generator=_gen(seed)) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
    def forward(self, x): return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale

class _AdaptedMLP(nn.Module):
    """A base MLP (64-128-128-10) with LoRA adapters on its three linear layers, loaded from a saved adapter as
    `PeftModel.from_pretrained(base, path, is_trainable=...)` does: with `is_trainable=False` (the default) every
    adapter weight is frozen too. The input is made to require a gradient, as `enable_input_require_grads()` does for
    PEFT training, so that a backward pass still runs when nothing is trainable"""
    def __init__(self, is_trainable):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
        for i in (0, 2, 4): self.net[i] = _LoRA(self.net[i], seed=i)
        for n, p in self.named_parameters():
            if 'lora_' in n: p.requires_grad_(is_trainable)
    def forward(self, x): return self.net(x.requires_grad_() if torch.is_grad_enabled() else x)

@case("https://github.com/huggingface/peft/issues/282",
      "a saved LoRA adapter is loaded for more training with `PeftModel.from_pretrained` and its default `is_trainable=False`: every weight is frozen and nothing trains",
      {'frozen'}, epochs=4, lr=1e-3)
def peft_adapter_loaded_not_trainable(fixed):
    """'No Trainable Parameters when PeftModel.from_pretrained()': loading an adapter onto its base model,
    `print_trainable_parameters()` gives 'trainable params: 0'; the maintainer: '`from_pretrained()` is set by default
    to load the save adapter in frozen mode, i.e., non trainable mode. This is controlled via `is_trainable`', so an
    adapter meant to be trained further is loaded with `is_trainable=True`. The digits as standardised vectors, a base
    MLP (64-128-128-10, frozen as PEFT freezes it) with LoRA adapters (r 8, alpha 16) on its three linear layers as they
    were saved (`A` random, `B` zero), the optimiser built over the model's parameters, cross-entropy, AdamW at 1e-3;
    the bug loads the adapter frozen, the twin with `is_trainable=True`. The forward pass, the loss and the backward
    pass all run; no weight has a gradient. Measured over 4 epochs: not one weight changes, the training loss stays at
    2.315 (1.00 of its first), the validation loss at 2.313 in every epoch at an accuracy of 0.025; in the twin the six
    adapter tensors move, the loss falls to 0.17 of its first (validation 0.38, accuracy 0.90)"""
    x, y = digits_raw()
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=32), _AdaptedMLP(is_trainable=fixed),
                   loss_func=nn.CrossEntropyLoss(), metrics=accuracy, opt_func=torch_opt(torch.optim.AdamW),
                   splitter=lambda m: list(m.parameters()))


# ---- the output and the loss: a log of log-probabilities ----
def _skorch_nll(y_pred, y_true):
    "skorch's `NeuralNetClassifier.get_loss` under `NLLLoss`: the output taken for probabilities, logged, then NLL"
    return F.nll_loss(torch.log(y_pred + torch.finfo(y_pred.dtype).eps), y_true)

@case("https://github.com/skorch-dev/skorch/issues/519",
      "a module ending in `LogSoftmax` is given to skorch's `NeuralNetClassifier` with `NLLLoss`, which takes the log of the output again: the log of negative numbers, a NaN loss",
      {'output_activation', 'nonfinite_loss'}, layer='3', epochs=10, lr=0.1)
def skorch_logsoftmax_logged_again(fixed):
    """'LogSoftmax + NLLLoss not working, CrossEntropyLoss working': 'a final LogSoftmax layer, then I chose the
    criterion to be NLLLoss ... The training loss was returning as nan ... I believe NLLLoss is receiving a new log of
    the predicted outputs'; the maintainer: 'When using `NLLLoss`, please use `Softmax` as the output nonlinearity'; the
    poster: 'Oh it did work, thank you!' skorch's classifier takes the module's output for probabilities and logs it
    before `NLLLoss`. The digits as standardised vectors, an MLP (64-100-10) ending in `LogSoftmax`, skorch's loss, its
    default SGD at 0.1 with batches of 128; the twin's module ends in `Softmax`. Measured: the loss is NaN from the
    first batch (110 of 110 batches) while its gradient stays finite and points the wrong way (the log's derivative at
    a negative input is negative): the weights stay finite, each step lowers the target's log-probability, and the
    validation accuracy falls to 0.006 to 0.03 over 10 epochs, below chance; the twin's loss falls to 0.12 of its first
    (validation 0.25, accuracy 0.94)"""
    x, y = digits_raw()
    model = nn.Sequential(nn.Linear(64, 100), nn.ReLU(), nn.Linear(100, 10),
                          nn.Softmax(-1) if fixed else nn.LogSoftmax(-1))
    return Learner(tensor_dls((x - x.mean()) / x.std(), y, bs=128), model, loss_func=_skorch_nll, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD))


# ---- data: graphs sorted by label, not shuffled ----
def _graphs(n=600, nodes=12, feats=8, seed=0):
    """Synthetic graphs for graph classification, stored as TUDataset stores them, sorted by label: node features and a
    dense adjacency `(n, nodes, nodes)`; class 1 has denser edges and a shifted first feature"""
    g = _gen(seed)
    y = (torch.arange(n) >= n // 2).long()                       # the file's order: all of class 0, then all of class 1
    p = torch.where(y == 1, 0.35, 0.2)[:, None, None]
    a = (torch.rand(n, nodes, nodes, generator=g) < p).float().triu(1)
    a = a + a.transpose(1, 2)
    x = torch.randn(n, nodes, feats, generator=g)
    x[:, :, 0] += 0.4 * y[:, None].float()
    return torch.cat([x, a], 2), y

class _GraphConvNet(nn.Module):
    "A GCN-like classifier: two rounds of mean aggregation over each node and its neighbours, a mean readout, a head"
    def __init__(self, feats=8, hid=32):
        super().__init__()
        self.feats = feats
        self.conv1, self.conv2, self.head = nn.Linear(feats, hid), nn.Linear(hid, hid), nn.Linear(hid, 2)
    def forward(self, xa):
        x, a = xa[..., :self.feats], xa[..., self.feats:]
        a = a + torch.eye(a.shape[-1])
        a = a / a.sum(-1, keepdim=True)
        h = F.relu(self.conv1(a @ x))
        h = F.relu(self.conv2(a @ h))
        return self.head(h.mean(1))

@case("https://github.com/dmlc/dgl/issues/3548",
      "a TUDataset, stored sorted by label, is trained through a loader without `shuffle=True`: the first batches hold only class 0, the last only class 1",
      {'unshuffled_batches'}, epochs=6, lr=1e-2)
def graphs_sorted_by_label_unshuffled(fixed):
    """'Is it more resonable to shuffle `TUDataset` when init it?': 'models performed poorly if I don't set shuffle in
    the train loader. It is because that if I don't set `shuffle=True`, `TUDataset` will be loaded in order. Then the
    batches at the beginning all have label 0 and the batches behind all have label 1'; the maintainer: 'Whether to
    shuffle or not is controlled by DataLoader', the fix being the loader's `shuffle=True` (and a note in the
    docstring). Synthetic graphs of 12 nodes in two classes stored in label order, the training indices of a random
    split kept in that order (as index lists from a split are), a small GCN-like network, cross-entropy, Adam at 1e-2,
    batches of 32; the twin's loader shuffles. Every layer can be healthy: each stretch of batches teaches one class.
    Measured over 6 epochs: the last batches' loss is 1.74 times the first's (each epoch ends on class 1 alone) and the
    validation accuracy stays at 0.467, the share of class 1, for five epochs (0.575 at the sixth; validation loss 0.75
    to 0.62); the twin's loss falls to 0.43 of its first (validation 0.39, accuracy 0.79)"""
    x, y = _graphs()
    idx = torch.randperm(len(x), generator=_gen(1))
    tr, va = idx[120:].sort().values, idx[:120]               # the training indices in the dataset's (label) order
    train = DataLoader([(x[i], y[i]) for i in tr.tolist()], bs=32, shuffle=fixed, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(x[i], y[i]) for i in va.tolist()], bs=32))
    return Learner(dls, _GraphConvNet(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- modes: a functional dropout that ignores eval ----
def _reviews(n=800, length=16, vocab=40, seed=0):
    "Synthetic reviews: token ids, 0-5 positive, 6-11 negative, the rest neutral; the label: which kind is commoner"
    g = _gen(seed)
    x = torch.randint(0, vocab, (n, length), generator=g)
    pos, neg = (x < 6).sum(1), ((x >= 6) & (x < 12)).sum(1)
    keep = pos != neg
    return x[keep], (pos > neg).long()[keep]

class _RNNClassifier(nn.Module):
    """skorch's RNN sentiment example scaled down: an embedding, a two-layer GRU, dropout on the last layer's final
    state, a linear layer and a softmax (skorch logs it for `NLLLoss`); the dropout `F.dropout(h, p)`, on whatever the
    mode, or an `nn.Dropout` module"""
    def __init__(self, module_dropout, p=0.5, vocab=40, emb=32, units=64):
        super().__init__()
        self.p, self.module_dropout = p, module_dropout
        self.emb = nn.Embedding(vocab, emb)
        self.rec = nn.GRU(emb, units, num_layers=2, batch_first=True)
        self.drop = nn.Dropout(p)
        self.output = nn.Linear(units, 2)
    def forward(self, x):
        h = self.rec(self.emb(x))[1][-1]
        h = self.drop(h) if self.module_dropout else F.dropout(h, p=self.p)
        return F.softmax(self.output(h), dim=-1)

@case("https://github.com/skorch-dev/skorch/pull/693",
      "the RNN classifier applies `F.dropout(h, p)` in its `forward` without `training=self.training`: dropout stays on when the network is validated and when it predicts",
      {'train_mode_in_eval', 'eval_nondeterministic'}, epochs=5, lr=0.01)
def functional_dropout_on_in_eval(fixed):
    """'Multiple small improvements to notebooks' (merged): in the RNN sentiment classification example, 'use dropout
    module instead of F.dropout (using the latter is a bug)'. The example's module called `F.dropout(rec_out,
    p=self.dropout)`; `F.dropout` defaults to `training=True` and does not see `model.eval()`, so with any dropout above
    its default 0 every validation score and every prediction was taken with dropout on. Synthetic reviews of 16 tokens,
    the example's network scaled down (an embedding of 32, a two-layer GRU of 64 units, dropout 0.5 on the final state,
    a linear layer, a softmax logged by skorch's loss), RMSprop at the example's 0.01, batches of 32, 5 epochs; the
    twin's dropout is an `nn.Dropout` module. Training is sound in both (loss ratios 0.09 and 0.03): only evaluation
    differs, so no statistic of training can see it. Measured: after `model.eval()` two passes over one validation batch
    give probabilities up to 0.30 apart (0 in the twin); validation loss 0.76, 0.60, 0.47, 0.34, 0.35 at accuracies 0.50
    to 0.87, against the twin's 0.69 to 0.33 at 0.57 to 0.90"""
    x, y = _reviews()
    return Learner(tensor_dls(x, y, bs=32), _RNNClassifier(module_dropout=fixed), loss_func=_skorch_nll,
                   metrics=accuracy, opt_func=torch_opt(torch.optim.RMSprop))
