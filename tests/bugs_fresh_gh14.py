"""Bug zoo, a fourteenth GitHub family (issue 45): from the issues of speech and graph repositories no other family
cites (PyTorch Geometric, OGB, deepspeech.pytorch, k2's icefall). See `bugzoo.py`. Each case cites its thread; its truth
(`kinds`, `layer`) was written before the case was ever run under the tool. Cases were chosen for how common the bug is
(negative edge weights given to a GCN's symmetric normalisation, a multi-task molecular data set's missing labels left
as NaN in the loss, a CTC loss given raw scores where it expects log-probabilities, utterances too short for their
transcripts after the encoder's subsampling), never for whether the tool catches it. The raw scores break nothing in
the network (the loss reads below zero at first; only its contract with the outputs is broken, and the bug slows
learning rather than stops it): its docstring says so. Each bug was checked with plain fastai (no fastexplorer) before
any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _gen


# ---- graphs: small dense graphs, features and weighted adjacency packed in one tensor ----
def _graphs(n=1000, nodes=12, feats=4, p_edge=0.3, seed=0):
    """`n` random undirected graphs of `nodes` nodes (each pair linked with probability `p_edge`, no self-loops): node
    features `(n, nodes, feats)` drawn from N(0, 1) and the 0/1 adjacency `(n, nodes, nodes)`, symmetric"""
    g = _gen(seed)
    x = torch.randn(n, nodes, feats, generator=g)
    a = (torch.rand(n, nodes, nodes, generator=g) < p_edge).float().triu(1)
    return x, a + a.transpose(1, 2)

class _GCNConv(nn.Module):
    """PyTorch Geometric's `GCNConv` on dense batched graphs: self-loops of weight 1 added, the weighted degree
    `deg = Â.sum(-1)`, `deg^-1/2` with infinities set to 0 (`gcn_norm`), then `D^-1/2 Â D^-1/2 X W + b`, each node
    summing the messages of its own edges only, as PyG's sparse propagation does"""
    def __init__(self, i, o):
        super().__init__()
        self.lin, self.bias = nn.Linear(i, o, bias=False), nn.Parameter(torch.zeros(o))
    def forward(self, x, a):
        a = a + torch.eye(a.shape[-1])
        dinv = a.sum(-1).pow(-0.5)
        dinv = dinv.masked_fill(dinv == float('inf'), 0.)
        norm = torch.where(a != 0, dinv[..., :, None] * a * dinv[..., None, :], 0.)   # messages along edges only
        return norm @ self.lin(x) + self.bias

class _GCN(nn.Module):
    "Two `GCNConv`s (ReLU after each), the mean over each graph's nodes (`global_mean_pool`), a linear head"
    def __init__(self, feats=4, hidden=32, n_out=2):
        super().__init__()
        self.feats = feats
        self.conv1, self.conv2, self.head = _GCNConv(feats, hidden), _GCNConv(hidden, hidden), nn.Linear(hidden, n_out)
    def forward(self, xa):
        x, a = xa[..., :self.feats], xa[..., self.feats:]
        h = F.relu(self.conv2(F.relu(self.conv1(x, a)), a))
        return self.head(h.mean(1))


# ---- a graph's edge weights: negative, under a normalisation that takes their square root ----
@case("https://github.com/pyg-team/pytorch_geometric/issues/795",
      "edge weights drawn from N(0, 1) are given to `GCNConv`, whose normalisation takes the inverse square root of "
      "each node's weighted degree: nodes with a negative degree output NaN",
      {'nonfinite'}, layer='conv1', epochs=4, lr=1e-2)
def gcn_negative_edge_weights(fixed):
    """'Weighted GCN layer produces some nans': 'When using weighed edges as input for GCNConv-Layer, I get some nans as
    results which do not make any sense. The problem is connected to edge_weights' (with `edge_weight =
    torch.randn(22)`); the maintainer: '`GCNConv` can not handle negative edge weights', and `edge_weight =
    torch.randn(22).abs()` 'fixes the problem' (the reporter: 'Thank you very much!'; a later PR adds an error for
    them). `gcn_norm` computes `deg.pow(-0.5)` and sets only infinities to 0, so a node whose weighted degree (its
    self-loop's 1 plus its edges' weights) is negative gets NaN, and the NaN spreads through the aggregation to the
    node's neighbours and to the graph's pooled output. The inputs are finite: the NaN is born in the first convolution.
    1,000 random graphs of 12 nodes (edges with probability 0.3, 4 features from N(0, 1)), the label whether the nodes'
    first feature sums above 0; PyG's `GCNConv` on dense batched graphs (two layers of 32, ReLU, mean pooling, a linear
    head), cross-entropy, Adam at 1e-2, batches of 32; the bug's edge weights are `randn`, the twin's `randn().abs()`.
    Measured (seeds 0 and 1): 28% of the nodes have a negative weighted degree and 94% of the graphs at least one; at
    initialisation 68% of the first convolution's node outputs are NaN, and 94% of the graphs' outputs; every batch loss
    is NaN from the first, whose step makes every parameter NaN, and the validation loss is NaN after each of 4 epochs
    (accuracy 0.535, the share of the class the argmax of NaN picks); the twin's validation accuracy is 0.965 and 0.975
    (loss 0.080 and 0.077), its batch losses ending at 0.15 and 0.16 of their first"""
    x, a = _graphs()
    w = torch.randn(a.shape, generator=_gen(1)).triu(1)
    w = w + w.transpose(1, 2)
    if fixed: w = w.abs()
    y = (x[..., 0].sum(1) > 0).long()
    return Learner(tensor_dls(torch.cat([x, a * w], -1), y, bs=32), _GCN(), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- a molecular benchmark's targets: missing labels stored as NaN ----
def _tox21_like(n=1000, tasks=12, missing=0.17, seed=0):
    """Graphs as `_graphs` and 12 binary tasks, each whether a fixed random projection of the graph's neighbourhood-
    averaged node features, summed over its nodes, is above its median; about 17% of the labels (tox21's share) are
    missing, stored as NaN as OGB stores them"""
    x, a = _graphs(n, seed=seed)
    g = _gen(seed + 1)
    h = ((a + torch.eye(a.shape[-1])) @ x / (a.sum(-1, keepdim=True) + 1)).sum(1)
    s = h @ torch.randn(x.shape[-1], tasks, generator=g)
    y = (s > s.median(0).values).float()
    y[torch.rand(y.shape, generator=g) < missing] = float('nan')
    return torch.cat([x, a], -1), y

def _bce_all(out, y): return F.binary_cross_entropy_with_logits(out, y)

def _bce_labelled(out, y):
    "OGB's example: the loss over the labelled entries only (`is_labeled = batch.y == batch.y`)"
    m = y == y
    return F.binary_cross_entropy_with_logits(out[m], y[m])

def _labelled_accuracy(out, y):
    "The share of the labelled entries predicted right"
    m = y == y
    return ((out[m] > 0).float() == y[m]).float().mean()

@case("https://github.com/snap-stanford/ogb/issues/4",
      "a multi-task molecular data set marks its missing labels NaN, and the binary cross-entropy is taken over every "
      "entry: the loss is NaN from the first batch",
      {'nonfinite_target'}, epochs=4, lr=1e-2)
def multitask_nan_labels_in_loss(fixed):
    """'Nan value in the labels of "ogbg-mol-tox21" dataset': 'it seems there are some missing values in the labels'
    (`tensor([[0., 0., 1., nan, nan, 0., ...]])`); the maintainer: 'nan represents "not labeled" (not positive nor
    negative), which will be ignored during evaluation' (closed); OGB's example trains on the labelled entries only
    (`is_labeled = batch.y == batch.y`). Taken over every entry, a binary cross-entropy with a NaN target is NaN, the
    batch's mean is NaN, and so are the gradients and then the weights. 1,000 random graphs of 12 nodes with 12 binary
    tasks (each a random projection of the neighbourhood-averaged features, split at its median), 17% of the labels NaN
    as in tox21; the GCN of `gcn_negative_edge_weights` with 12 outputs, `BCEWithLogits`, Adam at 1e-2; the twin masks
    the loss to the labelled entries as OGB's example does. Measured (seeds 0 and 1): 17.3% of the label entries are
    NaN and 90% of the graphs have one, so every batch does; every batch loss is NaN from the first, whose gradients are
    NaN and whose step puts NaN in the weights; the validation loss is NaN and the labelled accuracy 0.503 (chance: each
    task is split at its median) after each of 4 epochs; the twin's labelled accuracy is 0.939 and 0.938 (validation
    loss 0.139 and 0.145), its batch losses ending at 0.21 and 0.22 of their first"""
    x, y = _tox21_like()
    return Learner(tensor_dls(x, y, bs=32), _GCN(n_out=12), loss_func=_bce_labelled if fixed else _bce_all,
                   metrics=_labelled_accuracy, opt_func=torch_opt(torch.optim.Adam))


# ---- speech: CTC over synthetic utterances ----
_N_SYM = 6   # the symbols are 1..6, 0 is CTC's blank

def _utterances(n=1000, dim=16, per_symbol=(4, 8), max_frames=48, short=0.0, seed=0):
    """Synthetic utterances: a transcript of 2 to 5 symbols, each symbol spoken for `per_symbol` frames (4 to 7) of its
    own 16-d prototype plus noise, 0 to 2 frames of silence (noise) between and around them, zero-padded to
    `max_frames`. A share `short` of them are spoken fast, 1 to 2 frames a symbol and no silence (at most 10 frames).
    Inputs `(n, max_frames, dim)`; targets `(n, 7)`: the number of frames, the transcript's length, the symbols padded
    with 0"""
    g = _gen(seed)
    proto = 1.5 * torch.randn(_N_SYM + 1, dim, generator=g)
    x, y = torch.zeros(n, max_frames, dim), torch.zeros(n, 7, dtype=torch.long)
    for i in range(n):
        u = int(torch.randint(2, 6, (1,), generator=g))
        syms = torch.randint(1, _N_SYM + 1, (u,), generator=g)
        fast = bool(torch.rand(1, generator=g) < short)
        frames = []
        for s in syms.tolist():
            if not fast: frames += [0] * int(torch.randint(0, 3, (1,), generator=g))
            n_frames = torch.randint(1, 3, (1,), generator=g) if fast else torch.randint(*per_symbol, (1,), generator=g)
            frames += [s] * int(n_frames)
        if not fast: frames += [0] * int(torch.randint(0, 3, (1,), generator=g))
        t = len(frames)
        x[i, :t] = proto[torch.tensor(frames)] * (torch.tensor(frames) > 0).float()[:, None]
        x[i, :t] += 0.5 * torch.randn(t, dim, generator=g)
        y[i, 0], y[i, 1], y[i, 2:2 + u] = t, u, syms
    return x, y

class _CTCNet(nn.Module):
    """An acoustic model: a convolutional front end (two 1-d convolutions of stride `2` each when `subsample`, the
    conformer's ×4 subsampling; one of stride 1 otherwise), a bidirectional GRU, a linear head over the 6 symbols and
    the blank. `log_softmax` on the head's scores when `log_probs`, the raw scores otherwise"""
    def __init__(self, dim=16, hidden=64, subsample=False, log_probs=True):
        super().__init__()
        self.log_probs = log_probs
        stride = 2 if subsample else 1
        self.conv = nn.Sequential(nn.Conv1d(dim, hidden, 3, stride=stride), nn.ReLU(),
                                  *([nn.Conv1d(hidden, hidden, 3, stride=2), nn.ReLU()] if subsample else []))
        self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, _N_SYM + 1)
    def forward(self, x):
        out = self.head(self.rnn(self.conv(x.transpose(1, 2)).transpose(1, 2))[0])
        return F.log_softmax(out, -1) if self.log_probs else out

def _out_frames(frames, subsample):
    "The frames left after the front end: `((T-1)//2-1)//2` with the ×4 subsampling (as icefall's), `T-2` without"
    return (((frames - 3) // 2 + 1) - 3) // 2 + 1 if subsample else frames - 2

def _ctc_loss(subsample):
    "PyTorch's `CTCLoss` (blank 0, the mean over the batch of each loss over its transcript's length)"
    def loss(out, y):
        lens = _out_frames(y[:, 0], subsample).clamp(1, out.shape[1])
        return F.ctc_loss(out.transpose(0, 1), y[:, 2:], lens, y[:, 1], blank=0)
    return loss

def _greedy_decode(out):
    "Best path: the most likely symbol per frame, repeats merged, blanks dropped"
    best = out.argmax(-1).tolist()
    return [[s for j, s in enumerate(row) if s != 0 and (j == 0 or row[j - 1] != s)] for row in best]

def _sequence_accuracy(subsample):
    "The share of utterances whose greedy decoding (over their own frames) is their transcript exactly"
    def sequence_accuracy(out, y):
        lens = _out_frames(y[:, 0], subsample).clamp(1, out.shape[1])
        hits = [_greedy_decode(out[i:i + 1, :int(lens[i])])[0] == y[i, 2:2 + int(y[i, 1])].tolist()
                for i in range(len(out))]
        return torch.tensor(float(np.mean(hits)))
    return sequence_accuracy


# ---- the CTC loss given raw scores ----
@case("https://github.com/SeanNaren/deepspeech.pytorch/issues/488",
      "the network's raw scores are given to `CTCLoss`, which expects log-probabilities: the loss starts below zero "
      "and the model sits on all-blank outputs, no transcript learnt",
      {'output_activation'}, epochs=5, lr=3e-3)
def ctc_loss_on_raw_scores(fixed):
    """'Negative Loss': training DeepSpeech on Mozilla's Persian data, 'always the value of the loss becomes negative
    then the parameters don't update'; the reporter read that CTCLoss wants 'logarithmized probabilities', and closed
    with the fix: 'put the log_softmax as the activation function of the last layer in the training phase and it works
    well' (20% WER). Without the normalisation the loss is minus the log of a sum of exponentiated path scores, below
    zero when the scores are near 0 as at initialisation, and PyTorch's CTC backward is the gradient for log-softmaxed
    inputs, not for what it was given: the scores drift down until they are nearly normalised by themselves, and the
    model stays on the blank plateau. Nothing in the network is broken: only the loss's contract with the outputs is
    (and its first values, below zero, which no negative log-likelihood can be). 1,000 synthetic utterances (2 to 5 of 6
    symbols, each 4 to 7 frames of a noisy 16-d prototype, short silences, padded to 48 frames; 200 held out), a conv +
    bidirectional GRU acoustic model, PyTorch's `CTCLoss` (blank 0), Adam at 3e-3, batches of 32; the twin puts
    `log_softmax` on the head. Measured (seeds 0 and 1): the first batch losses are -3.1 and -4.0 (6 and 3 batches below
    zero), then the loss rises to 0.6 to 0.8 and stays; by the end the scores' log-sum-exp per frame is 0.16 and 0.10
    (normalised would be 0) and 99% and 100% of the frames are blank: no validation utterance is decoded right after any
    of 5 epochs (validation loss 0.71 and 0.75; the batch losses' ratio, 0.17 and 0.97, is taken from a start below
    zero); the twin decodes 0.825 and 0.85 of them exactly after 5 epochs (validation loss 0.15 and 0.16), its batch
    losses ending at 0.086 and 0.074 of their first. Run on (seed 0), the bug leaves the plateau in its 11th epoch and
    decodes 0.865 after 15: here the raw scores slow learning about threefold rather than stop it"""
    x, y = _utterances()
    return Learner(tensor_dls(x, y, bs=32), _CTCNet(log_probs=fixed), loss_func=_ctc_loss(False),
                   metrics=_sequence_accuracy(False), opt_func=torch_opt(torch.optim.Adam))


# ---- utterances too short for their transcripts after subsampling ----
@case("https://github.com/k2-fsa/icefall/issues/135",
      "some utterances are so short that after the encoder's ×4 subsampling they have fewer frames than their "
      "transcripts have symbols: no CTC alignment exists, and their loss is infinite",
      {'nonfinite_loss'}, epochs=5, lr=3e-3)
def ctc_utterances_too_short(fixed):
    """'Get inf ctc loss during training': 'I have debug it, and find the batch which changes ctc loss to inf has very
    short data. The minimum of number frames (before subsampling) is 11'; filtering 'short segment less than 1s ...
    seems to be ok'. The maintainer: with the conformer's subsampling of 4, 11 frames give `((11 - 1) / 2 - 1) / 2 = 2`,
    and 'One of the assumptions of CTC is that the output label length is not greater than that of the input length. If
    that assumption does not hold, you will get an empty lattice, and hence an `inf` value'; the fixes: exclude the
    infinite losses, or 'Filter utterances that are too short from the manifest', which the reporter did. 1,000
    synthetic utterances as `ctc_loss_on_raw_scores`'s but of 8 to 12 frames a symbol (16 to 64 frames), of which 60 are
    spoken fast (1 to 2 frames a symbol: 2 to 8 frames for 2 to 5 symbols, 1 or none after subsampling), a conv front
    end with icefall's ×4 subsampling (two convolutions of stride 2), a bidirectional GRU, `log_softmax`, PyTorch's
    `CTCLoss` (its default `zero_infinity=False`), Adam at 3e-3; the twin drops the utterances shorter than 16 frames
    from the data, as the reporter did. Measured (seeds 0 and 1): 86% of the batches of 32 hold an utterance with no
    alignment; the first batch loss is inf, its gradients NaN, and its step makes 10 of the 14 parameter tensors wholly
    NaN; every later loss is NaN, and after each of 5 epochs the validation loss is NaN and no utterance is decoded
    right; the twin (940 utterances) decodes 0.79 and 0.81 of the validation utterances exactly (validation loss 0.13
    and 0.12), its batch losses ending at 0.064 of their first at both seeds"""
    x, y = _utterances(per_symbol=(8, 13), max_frames=80, short=0.06)
    if fixed: x, y = x[y[:, 0] >= 16], y[y[:, 0] >= 16]
    return Learner(tensor_dls(x, y, bs=32), _CTCNet(subsample=True), loss_func=_ctc_loss(True),
                   metrics=_sequence_accuracy(True), opt_func=torch_opt(torch.optim.Adam))
