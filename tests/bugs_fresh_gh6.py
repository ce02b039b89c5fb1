"""Bug zoo, a sixth family from GitHub threads of model-code repositories no other family cites (sentence-transformers,
the code of Raschka's machine-learning book, DeepCell's preprocessing toolbox, Flux's website tutorials). See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever
run under the tool. Cases were chosen for how common the bug is (a classifier head that lives in the loss, outside the
optimiser's parameters; labels compared with strings a dataset no longer gives, so every label is 0; a per-image z-score
with no epsilon, which blank tiles turn into 0/0; test images scored against the training labels), never for whether the
tool catches it. Two leave every per-layer statistic of the model healthy: the head held by the loss is no module of the
model, and the validation labels are wrong while training is sound; their docstrings say so. Each bug was checked with
plain fastai (no fastexplorer) before any run under the tool: it shows its thread's symptom, its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _docs
from bugs_fresh import _gen


# ---- the optimiser: a head that lives in the loss ----
def _nli_pairs(n=1200, n_topics=6, vocab=300, length=12, seed=0):
    """Sentence pairs as word ids `(n, 2, length)`, each sentence of one topic (a topic word with chance 0.5, else any
    word), the topics paired in groups (0 and 1, 2 and 3…), and a 3-way label: 0 the same topic (entailment), 1 the
    other topic of the group (neutral), 2 a topic of another group (contradiction)"""
    g = _gen(seed)
    topics = 1 + torch.randperm(vocab - 1, generator=g)[:n_topics * 20].view(n_topics, 20)
    def sentences(t):
        w = torch.randint(1, vocab, (len(t), length), generator=g)
        on = torch.rand(len(t), length, generator=g) < 0.5
        w[on] = topics[t.unsqueeze(1).expand(-1, length)[on], torch.randint(0, 20, (int(on.sum()),), generator=g)]
        return w
    y = torch.randint(0, 3, (n,), generator=g)
    ta = torch.randint(0, n_topics, (n,), generator=g)
    other = (ta // 2 * 2 + 2 + torch.randint(0, n_topics - 2, (n,), generator=g)) % n_topics   # another group's
    tb = torch.where(y == 0, ta, torch.where(y == 1, ta ^ 1, other))
    return torch.stack([sentences(ta), sentences(tb)], 1), y

class _SentenceEncoder(nn.Module):
    "A bi-encoder: each sentence of a pair through the same encoder (the mean of word embeddings, a dense layer, tanh)"
    def __init__(self, vocab=300, dim=32):
        super().__init__()
        self.emb, self.dense = nn.EmbeddingBag(vocab, dim, mode='mean'), nn.Linear(dim, dim)
    def forward(self, pairs):
        b, two, l = pairs.shape
        return torch.tanh(self.dense(self.emb(pairs.reshape(b * two, l)))).view(b, two, -1)   # (u, v) per pair

class _SoftmaxLoss(nn.Module):
    "sentence-transformers' `SoftmaxLoss`: a linear classifier on `(u, v, |u - v|)`, held by the loss; cross-entropy"
    def __init__(self, dim=32, n_labels=3):
        super().__init__()
        self.classifier = nn.Linear(3 * dim, n_labels)
    def logits(self, emb):
        u, v = emb[:, 0], emb[:, 1]
        return self.classifier(torch.cat([u, v, (u - v).abs()], -1))
    def forward(self, emb, y): return F.cross_entropy(self.logits(emb), y)

@case("https://github.com/huggingface/sentence-transformers/issues/2872",
      "`SoftmaxLoss`'s classifier belongs to the loss; the optimiser is built from the model's weights: it never moves",
      {'unregistered_params', 'optimizer_groups', 'frozen'}, epochs=6, lr=5e-3)
def softmax_loss_head_not_optimised(fixed):
    """'is SoftmaxLoss trainable?': 'the classifier is initialized out of Module, so, when create optimizer, the
    classifier's weight is not given to AdamOptimizer'; a maintainer printed the weights after every batch ('it truly
    does seem like the SoftmaxLoss.classifiers parameters aren't changing') and confirmed the bug: v3's trainer built
    the optimiser over the model, where the old `fit` built it over the loss model; the merged fix (#2881) initialises
    the optimiser 'using the weights across all losses'. Ported: a bi-encoder (mean of word embeddings, a dense layer,
    tanh) on synthetic sentence pairs of six topics labelled entailment / neutral / contradiction, `SoftmaxLoss` as
    fastai's `loss_func`, which holds the classifier on `(u, v, |u - v|)`; fastai, like the v3 trainer, builds its
    optimiser from the model alone. The twin's `splitter` adds the loss's parameters, as the fix does. The classifier is
    no module of the model: no statistic of a model layer sees it. AdamW at 5e-3, batches of 32, 6 epochs. Measured: the
    classifier's weights end exactly where they began (largest change 0); the encoder bends towards the random
    classifier, so the loss still falls, slowly, from 1.10 to 0.80 (ratio 0.73; validation 0.93, accuracy 0.60); the
    twin's classifier moves (largest change 0.54), its loss falls from 1.10 to 0.21 (ratio 0.19; validation 0.50,
    accuracy 0.80)"""
    x, y = _nli_pairs()
    model, loss = _SentenceEncoder(), _SoftmaxLoss()
    def acc(emb, t): return (loss.logits(emb).argmax(-1) == t).float().mean()
    def with_loss(m): return [list(m.parameters()) + list(loss.parameters())]   # the fix: the loss's weights too
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=loss, metrics=acc, opt_func=torch_opt(torch.optim.AdamW),
                   **({'splitter': with_loss} if fixed else {}))


# ---- the labels: compared with strings the dataset no longer gives ----
class _SentimentLSTM(nn.Module):
    "The book's sentiment RNN, smaller: an embedding, an LSTM, its last hidden state through dense layers to a sigmoid"
    def __init__(self, vocab=500, emb=20, hid=32):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(vocab, emb, padding_idx=0), nn.LSTM(emb, hid, batch_first=True)
        self.fc = nn.Sequential(nn.Linear(hid, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
    def forward(self, x):
        _, (h, _) = self.rnn(self.emb(x))
        return self.fc(h[-1])

def _bce_accuracy(p, t): return ((p > 0.5).float() == t).float().mean()

@case("https://github.com/rasbt/machine-learning-book/issues/135",
      "the labels are mapped `'pos'` to 1, else 0, but the dataset now gives them as 1 and 2: every label is 0",
      {'labels_one_class'}, epochs=10, lr=1e-3)
def imdb_labels_compared_with_strings(fixed):
    """'Getting 100% accuracy while training': with chapter 15's IMDb sentiment LSTM, 'I am getting 100% validation
    accuracy' from the first epoch, 'and the test accuracy is also 100%'. torchtext 0.15 gives the labels as integers
    ('"neg" is `1`, and "pos" is `2`', a comment on the related #107 says), while the book's `label_pipeline = lambda x:
    1. if x == 'pos' else 0.` still compares them with strings, so every label becomes 0; the merged fix (#137) maps the
    new integer labels to 0 and 1 (its description: 'The labels in IMDB dataset were "pos" and "neg" earlier'). Every
    layer can be healthy: the model learns the one class perfectly. Ported: two-topic synthetic reviews (word ids) with
    labels coded 1 and 2 as torchtext codes them, the book's model scaled down (embedding 20, LSTM 32, dense 32, a
    sigmoid output), `BCELoss`, Adam at 1e-3, batches of 32, 10 epochs. Measured: every target is 0; the loss falls from
    0.77 to 0.001 (validation 0.001), the validation accuracy is 0.02 after the first epoch (outputs still above 0.5),
    0.91 after the second and 1.00 from the third on; the twin's loss falls from 0.69 to 0.05 (ratio 0.07; validation
    0.30, accuracy 0.88)"""
    x, raw = _docs(n_per=300, n_classes=2, vocab=500, length=20, seed=1)
    raw = raw + 1                                                        # torchtext 0.15: 1 for 'neg', 2 for 'pos'
    label = (lambda l: 1. if l == 2 else 0.) if fixed else (lambda l: 1. if l == 'pos' else 0.)
    y = torch.tensor([[label(l)] for l in raw.tolist()])
    return Learner(tensor_dls(x, y, bs=32), _SentimentLSTM(), loss_func=nn.BCELoss(), metrics=_bce_accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- preprocessing: a z-score with no epsilon ----
def _cell_tiles(n=240, size=16, empty=0.15, seed=0):
    """Fluorescence tiles as integer counts: a dim background (0 to 3) with 1 to 4 bright round cells (20 to 40), and
    their cell masks; a share `empty` of the tiles blank (all 0), as tiles cut beyond a padded image's edge are"""
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(size * 1.), torch.arange(size * 1.), indexing='ij')
    x = torch.randint(0, 4, (n, 1, size, size), generator=g).float()
    m = torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        for _ in range(int(torch.randint(1, 5, (1,), generator=g))):
            cy, cx = torch.randint(2, size - 2, (2,), generator=g).tolist()
            r = 1.5 + 1.5 * float(torch.rand(1, generator=g))
            disc = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            m[i][disc] = 1
            x[i, 0][disc] = float(torch.randint(20, 41, (1,), generator=g))
    blank = torch.rand(n, generator=g) < empty
    x[blank], m[blank] = 0., 0
    return x, m

def _normalize(x, eps):
    "DeepCell's `normalize`: each image minus its mean, divided by its standard deviation (plus `eps`, the fix)"
    mean, std = x.mean((1, 2, 3), keepdim=True), x.std((1, 2, 3), keepdim=True)
    return (x - mean) / (std + eps)

class _TinySeg(nn.Module):
    "A small fully convolutional segmenter: two 3×3 convolutions, a 1×1 head to two class maps (background, cell)"
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(16, 2, 1)
    def forward(self, x): return self.head(self.body(x))

@case("https://github.com/vanvalenlab/deepcell-toolbox/issues/71",
      "each image is z-scored with no epsilon under its standard deviation: a blank tile is 0/0, NaN, and poisons all",
      {'nonfinite_input'}, epochs=3, lr=1e-3)
def zscore_without_epsilon(fixed):
    """'normalize has no epsilon in the denominator': 'The preprocessing functions image normalization, which z-score
    each channel in each image, don't have an epsilon in the denominator of this calculation. For images with very low
    standard deviation, this causes the values to blow up. This caused weird bugs during training'; the merged fix (#72)
    adds `1e-07` to the standard deviation 'to prevent any `NaN` issues when the standard deviation is 0'. Ported: cell
    segmentation on synthetic fluorescence tiles (integer counts, bright round cells on a dim background), 15% of them
    blank, each tile z-scored as DeepCell does; a small fully convolutional segmenter, pixel-wise cross-entropy, Adam at
    1e-3, batches of 16. Measured: 33 of the 240 tiles become all NaN; the first batch holds one and its loss is NaN,
    its step turns every weight NaN, and every later loss (training and validation) is NaN; the twin's blank tiles
    become 0, its loss falls from 0.69 to 0.34 (ratio 0.49; validation 0.32)"""
    x, m = _cell_tiles()
    dls = tensor_dls(_normalize(x, 1e-7 if fixed else 0.), m, bs=16)
    return Learner(dls, _TinySeg(), loss_func=nn.CrossEntropyLoss(), opt_func=torch_opt(torch.optim.Adam))


# ---- evaluation: the test images scored against the training labels ----
def _lenet():
    "A LeNet-shaped network as the tutorial's, for 8×8 images: two convolutions with max-pooling, three dense layers"
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 2 * 2, 120), nn.ReLU(),
                         nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

@case("https://github.com/FluxML/fluxml.github.io/pull/119",
      "the test set pairs the test images with the first training labels: each validation image has another's label",
      {'labels_misaligned', 'valid_at_chance'}, epochs=6, lr=0.05)
def valid_images_with_training_labels(fixed):
    """'Minor error with 60 minute blitz tutorial': 'There was a minor error where the training labels were applied to
    the test data, which naturally gave random accuracy results later on'; the merged fix takes the test labels.
    Training is sound and every layer healthy: only the labels the validation scores against are wrong. Ported: the
    blitz's small LeNet-shaped network on the digits as 8×8 images (its CIFAR-10 images are a download), cross-entropy,
    SGD with momentum 0.9 at 0.05, batches of 32, 6 epochs; the bug's validation set pairs the 360 held-out images
    with the first 360 training labels. Measured: bug and twin train alike, the loss falling from 2.30 to 0.17 (ratio
    0.08); the bug's validation loss rises from 2.31 to 12.0 at an accuracy of 0.08 to 0.12, the twin's falls to 0.17 at
    an accuracy of 0.96"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    if not fixed: yv = yt[:len(xv)]                                      # the training labels, on the test images
    return Learner(_dls(xt, yt, xv, yv, bs=32), _lenet(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9))
