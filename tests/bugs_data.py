"""Bug zoo, family 3: the data, the targets and labels, the loss's contract with them, preprocessing and evaluation. See
`bugzoo.py`. Several of these bugs leave every layer's statistics healthy (labels all one class, pads counted in the
loss, dropout left on in evaluation, pixels scrambled by a `reshape`): their docstrings say so. Kinds that no check raises yet, assumed here as a correct
tool would name them: `labels_one_class`, `multi_hot_softmax`, `nonfinite_input`, `nonfinite_target`, `target_shape`,
`padding_in_loss`, `eval_nondeterministic`, `train_mode_in_eval`, `last_batch_one`, `input_layout`, `valid_input_shift`,
`labels_misaligned`."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *

# ---- what these ports share (synthetic stand-ins for the reports' data, no downloads) ----
def _gen(seed=0): return torch.Generator().manual_seed(seed)

def _dls(xt, yt, xv, yv, bs=32, drop_last=True, seed=0)->DataLoaders:
    "fastai `DataLoaders` over a training set (`xt`, `yt`, shuffled) and a validation set (`xv`, `yv`) given apart"
    train = DataLoader([(xt[i], yt[i]) for i in range(len(xt))], bs=bs, shuffle=True, drop_last=drop_last)
    train.rng = random.Random(seed)
    return DataLoaders(train, DataLoader([(xv[i], yv[i]) for i in range(len(xv))], bs=bs))

def _split(x, y, n_valid=360, seed=0):
    "A random split of `x`, `y`, `n_valid` samples held out: `(xt, yt, xv, yv)`"
    idx = torch.randperm(len(x), generator=_gen(seed))
    return x[idx[n_valid:]], y[idx[n_valid:]], x[idx[:n_valid]], y[idx[:n_valid]]

def _digit_vectors():
    "The digits as standardised 64-d vectors"
    x, y = digits_raw()
    return (x - x.mean()) / x.std(), y

def _digit_images(scale='unit'):
    "scikit-learn's digits as `(n, 1, 8, 8)` images: `unit` (0..1, as `ToTensor` gives), `byte` (0..240 integers, as a file holds them)"
    x, y = digits_raw()
    x = x.view(-1, 1, 8, 8)
    return ((x * 15).round() if scale == 'byte' else x / 16), y

def _keras_init(model):
    "Keras's initialisation: Glorot-uniform kernels, zero biases"
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)): nn.init.xavier_uniform_(m.weight); nn.init.zeros_(m.bias)
    return model

def _small_cnn(c_in=1, n_out=10, bn=False):
    "A small convolutional classifier for 8×8 images: two 3×3 convolutions (with BatchNorm if `bn`), global pooling, a linear head"
    def block(i, o): return [nn.Conv2d(i, o, 3, padding=1), *([nn.BatchNorm2d(o)] if bn else []), nn.ReLU()]
    return nn.Sequential(*block(c_in, 16), *block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, n_out))

def _blobs(n=240, size=16, n_classes=2, channels=1, seed=0):
    "Segmentation data: noisy images with 1-3 bright rectangles, each of a class 1..n_classes-1 (brighter for higher classes); masks of class indices"
    g = _gen(seed)
    x, m = 0.3 * torch.randn(n, channels, size, size, generator=g), torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            r, c = torch.randint(0, size - 5, (2,), generator=g).tolist()
            h, w = torch.randint(3, 6, (2,), generator=g).tolist()
            k = int(torch.randint(1, n_classes, (1,), generator=g))
            m[i, r:r + h, c:c + w] = k
            x[i, :, r:r + h, c:c + w] += k
    return x, m

def _tiny_unet(c_in=1, n_out=2):
    "A two-level U-Net: a convolution, a downsampled convolution, upsampling, the skip joined, a 1×1 convolution to `n_out` maps"
    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = nn.Sequential(nn.Conv2d(c_in, 16, 3, padding=1), nn.ReLU())
            self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.outc = nn.Conv2d(32, n_out, 1)
        def forward(self, x):
            a = self.inc(x)
            return self.outc(torch.cat([a, self.up(self.down(a))], 1))
    return UNet()

def _docs(n_per=300, n_classes=3, vocab=500, length=20, seed=0):
    "Short documents of `n_classes` classes (word ids, 0 kept for padding): each word a class's topic word with chance 0.3, else any word"
    g, xs, ys = _gen(seed), [], []
    topics = 1 + torch.randperm(vocab - 1, generator=g)[:n_classes * 30].view(n_classes, 30)
    for k in range(n_classes):
        words = torch.randint(1, vocab, (n_per, length), generator=g)
        topical = torch.rand(n_per, length, generator=g) < 0.3
        words[topical] = topics[k][torch.randint(0, 30, (int(topical.sum()),), generator=g)]
        xs.append(words); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _BagOfWords(nn.Module):
    "A text model: the mean of its word embeddings, a hidden layer, `n_out` outputs (the classifier or regression head)"
    def __init__(self, vocab=500, dim=32, n_out=3, squeeze=False):
        super().__init__()
        self.emb, self.squeeze = nn.EmbeddingBag(vocab, dim, mode='mean'), squeeze
        self.head = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, n_out))
    def forward(self, x):
        out = self.head(self.emb(x))
        return out.squeeze(-1) if self.squeeze else out

def _multilabel(n=1200, n_features=60, n_classes=6, seed=0):
    "Multi-label data (scikit-learn's `make_multilabel_classification`): standardised count features, multi-hot labels"
    from sklearn.datasets import make_multilabel_classification
    x, y = make_multilabel_classification(n_samples=n, n_features=n_features, n_classes=n_classes, n_labels=2, random_state=seed)
    x = torch.tensor(x, dtype=torch.float32)
    return (x - x.mean(0)) / (x.std(0) + 1e-6), torch.tensor(y)


# ---- the loss and its targets ----
@case("https://discuss.pytorch.org/t/loss-function-for-multi-class-with-probabilities-as-output/60866",
      "one-hot targets turned into class indices for `nn.CrossEntropyLoss`, but the model still ends in a softmax: the loss applies a second one",
      {'output_activation'}, epochs=3, lr=1e-3)
def one_hot_targets_extra_softmax(fixed):
    """The user's targets were one-hot vectors of size C, the output a vector of probabilities; the answer converts the targets
    to indices (`torch.max(targets, 1)`) for `nn.CrossEntropyLoss`, and the user found the fix was also to drop the output
    activation, 'an extra logit transformation'. Ported on the digits (one-hot), an MLP, Adam"""
    x, y = _digit_vectors()
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10), *([] if fixed else [nn.Softmax(dim=1)]))
    def one_hot_ce_loss(outputs, targets): return F.cross_entropy(outputs, targets.argmax(1))
    return Learner(tensor_dls(x, F.one_hot(y, 10).float(), bs=32), model, loss_func=one_hot_ce_loss,
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/milesial/Pytorch-UNet/issues/291",
      "segmentation masks loaded as greyscale values (0 and 192) where `nn.CrossEntropyLoss` wants class indices: `IndexError: Target 192 is out of bounds`",
      {'target_classes'}, epochs=3, lr=1e-3)
def unet_mask_grey_levels(fixed):
    """The repository's U-Net (`n_classes=2`) under `nn.CrossEntropyLoss`, its masks read as greyscale; the maintainer: load the
    masks as class indices (0..n_classes-1), not raw greyscale values. A two-level U-Net on 16×16 images here; RMSprop with
    momentum 0.9 as the repository, at 1e-3"""
    x, m = _blobs()
    if not fixed: m = m * 192
    return Learner(tensor_dls(x, m, bs=16), _tiny_unet(), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.RMSprop, momentum=0.9))

@case("https://github.com/pytorch/pytorch/issues/15666",
      "a CIFAR10 variant labels its classes 1..10; the 10-way classifier under `nn.CrossEntropyLoss` needs 0..9: the class-10 target is out of range",
      {'target_classes'}, epochs=3, lr=3e-3)
def labels_one_to_ten(fixed):
    """The user's CIFAR10 copy had labels 1..10 and hit the assertion `t >= 0 && t < n_classes` on CUDA: class indices run
    from 0 to n_classes - 1. Ported on the digits as images, a small CNN with BatchNorm, Adam; the fix subtracts 1 from every label"""
    x, y = _digit_images()
    return Learner(tensor_dls(x, y if fixed else y + 1, bs=32), _small_cnn(bn=True), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/EricFillion/happy-transformer/issues/248",
      "a text classifier's csv labels its classes -1, 0 and 1: `IndexError: Target -1 is out of bounds`",
      {'target_classes'}, epochs=3, lr=1e-2)
def labels_minus_one(fixed):
    """The user's csv held labels from -1 (14,000 rows, 'text' and 'value'); the maintainer: the lowest valid label is 0. A
    bag-of-words classifier stands for the transformer, three classes of synthetic documents, Adam"""
    x, y = _docs()
    return Learner(tensor_dls(x, y if fixed else y - 1, bs=32), _BagOfWords(), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/HasnainRaz/FC-DenseNet-TensorFlow/issues/17",
      "masks of class indices divided by 255 like the images: every label becomes 0, the background, and the model learns one class",
      {'labels_one_class'}, epochs=3, lr=3e-3)
def mask_divided_like_image(fixed):
    """The repository's `normalize_data` divided image and mask by 255 (written for 0/255 binary masks); on masks of class
    indices (0..C) every label becomes background; the maintainer: comment the mask's normalisation out. Four classes, a
    small U-Net, Adam. Every layer behaves: only the targets show it (all one class)"""
    x, m = _blobs(n_classes=4)
    if not fixed: m = (m.float() / 255).long()
    return Learner(tensor_dls(x, m, bs=16), _tiny_unet(n_out=4), loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/FrancoisPorcher/awesome-ai-tutorials/issues/3",
      "a U-Net with a sigmoid output under `nn.BCELoss` gets masks of 0 and 255: `all elements of target should be between 0 and 1`",
      {'target_range'}, epochs=3, lr=1e-3)
def bce_mask_0_255(fixed):
    """The tutorial's brain-MRI U-Net (a sigmoid output under `binary_cross_entropy`) read its masks with `cv2.imread`, 0 and
    255; the fix that worked: divide the mask by 255. Ported at 16×16 with a two-level U-Net, Adam"""
    x, m = _blobs()
    m = (m > 0).float().unsqueeze(1) * (1 if fixed else 255)
    model = nn.Sequential(_tiny_unet(n_out=1), nn.Sigmoid())
    return Learner(tensor_dls(x, m, bs=16), model, loss_func=nn.BCELoss(), opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/MontaEllis/Pytorch-Medical-Segmentation/issues/8",
      "`BCEWithLogitsLoss` on segmentation labels read from png (0 and 255) instead of 0/1: the loss goes negative and keeps falling",
      {'target_range', 'loss_at_init'}, epochs=3, lr=1e-3)
def bce_with_logits_labels_png(fixed):
    """The repository's 2-d segmentation under `BCEWithLogitsLoss`; the answer to 'why is the loss negative': the labels are
    not 0/1, normalise them as they are read. A two-level U-Net at 16×16, Adam"""
    x, m = _blobs(seed=1)
    m = (m > 0).float().unsqueeze(1) * (1 if fixed else 255)
    return Learner(tensor_dls(x, m, bs=16), _tiny_unet(n_out=1), loss_func=nn.BCEWithLogitsLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/deepset-ai/FARM/issues/229",
      "a regression head's output is squeezed to `(32,)` while the labels are `(32, 1)`: MSE broadcasts them to `(32, 32)`",
      {'target_shape'}, epochs=4, lr=1e-2)
def regression_output_squeezed(fixed):
    """FARM's `RegressionHead` squeezed its logits, the labels kept shape `(batch, 1)` (the warning 'Using a target size ...
    different to the input size'; labels 0 to 16); the fix (#230) makes the shapes match. A bag-of-words regressor stands for
    DistilBERT, the target a document's count of topic words. The loss still falls a little: each output is pulled toward the
    batch's mean label"""
    g = _gen(3)
    x = torch.randint(1, 500, (1500, 20), generator=g)
    topical = torch.rand(1500, 20, generator=g) < torch.rand(1500, 1, generator=g) * 0.8
    x[topical] = torch.randint(1, 17, (int(topical.sum()),), generator=g)
    y = ((x < 17) & (x > 0)).float().sum(1, keepdim=True).clamp(max=16)
    return Learner(tensor_dls(x, y, bs=32), _BagOfWords(n_out=1, squeeze=not fixed), loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/wenliangdai/Modality-Transferable-MER/issues/3",
      "multi-label emotion targets (multi-hot over 6 emotions) trained under `nn.CrossEntropyLoss`: `multi-target not supported`",
      {'multi_hot_softmax'}, epochs=5, lr=1e-3)
def multi_hot_cross_entropy(fixed):
    """CMU-MOSEI is multi-label; the README's command chose the `ce` loss; the fix the author confirmed: the `bce` loss. An MLP
    over fused features stands for the model, multi-hot labels from `make_multilabel_classification`, Adam"""
    x, y = _multilabel()
    model = nn.Sequential(nn.Linear(60, 64), nn.ReLU(), nn.Linear(64, 6))
    def bce(out, t): return F.binary_cross_entropy_with_logits(out, t.float())
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=bce if fixed else nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/keras-team/keras/issues/741",
      "a multi-label classifier ends in a softmax under `categorical_crossentropy`: the labels compete for one unit of probability, the loss does not converge",
      {'multi_hot_softmax'}, epochs=4, lr=1e-3)
def multi_label_softmax(fixed):
    """The user trained 'a multi-label softmax classifier' on multi-hot labels; the answer: sigmoid units in the output layer
    and `binary_crossentropy`. An MLP, Keras's losses as Keras computes them, Adam"""
    x, y = _multilabel(seed=1)
    model = nn.Sequential(nn.Linear(60, 64), nn.ReLU(), nn.Linear(64, 6), nn.Sigmoid() if fixed else nn.Softmax(dim=1))
    def categorical_crossentropy(p, t): return -(t * torch.log(p.clamp(1e-7, 1 - 1e-7))).sum(1).mean()
    return Learner(tensor_dls(x, y.float(), bs=32), model, loss_func=keras_bce if fixed else categorical_crossentropy,
                   opt_func=torch_opt(torch.optim.Adam))

def _padded_sequences(n=800, length=16, vocab=20, seed=0):
    "Token sequences that count up from a random start (mod `vocab - 1`, ids 1..vocab-1), of random lengths, padded with 0 to `length`"
    g = _gen(seed)
    start, lens = torch.randint(0, vocab - 1, (n, 1), generator=g), torch.randint(3, length + 1, (n, 1), generator=g)
    pos = torch.arange(length + 1)
    seq = 1 + (start + pos) % (vocab - 1)
    seq[pos >= lens] = 0
    return seq[:, :-1], seq[:, 1:]

class _TinyLM(nn.Module):
    "A next-token model: embedding, GRU, a linear layer to the vocabulary; the logits as `(batch, vocab, length)`"
    def __init__(self, vocab=20, dim=32):
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(vocab, dim), nn.GRU(dim, dim, batch_first=True), nn.Linear(dim, vocab)
    def forward(self, x): return self.out(self.rnn(self.emb(x))[0]).transpose(1, 2)

@case("https://github.com/lucidrains/DALLE-pytorch/issues/57",
      "`ignore_index` is defined but the cross-entropy never gets it: the padding tokens are counted in the loss",
      {'padding_in_loss'}, epochs=3, lr=3e-3)
def padding_counted_in_loss(fixed):
    """DALL-E's text loss was `F.cross_entropy(logits, labels)` with the tokenizer's pad id 0 among the labels; the fix (#58)
    passes `ignore_index` (the pad id). A GRU language model on padded counting sequences, Adam. No statistic of a layer sees
    it: the loss falls, much of it on predicting pads"""
    x, y = _padded_sequences()
    return Learner(tensor_dls(x, y, bs=32), _TinyLM(), loss_func=nn.CrossEntropyLoss(ignore_index=0 if fixed else -100),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the inputs and their preprocessing ----
@case("https://github.com/keras-team/keras/issues/255",
      "pixels scaled to [0, 1] while still integers: every input is 0, the model cannot learn (loss stuck at 17.27, accuracy 0.5)",
      {'constant_output', 'ignores_input', 'input_scale'}, epochs=3, lr=0.01)
def integer_pixels_scaled_to_zero(fixed):
    """The user's two-class screenshots (about 500 per class, one-hot labels, `categorical_crossentropy`) were normalised to
    [0, 1] while the array was still `int`, so each pixel became 0; the fix, normalising as floats. The user's CNN is not in
    the thread: Keras's cifar10 example, which the thread ran as a check, stands for it, scaled down (SGD at 0.01, Nesterov
    momentum 0.9); digits below 5 against the rest stand for the two classes"""
    x, y = _digit_images('byte')
    x = x / 255 if fixed else torch.div(x, 255, rounding_mode='floor')
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Dropout(0.25), nn.Flatten(), nn.Linear(16 * 9, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 2),
                          nn.Softmax(dim=1))
    return Learner(tensor_dls(x, (y >= 5).long(), bs=32), _keras_init(model), loss_func=keras_ce,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, nesterov=True))

@case("https://github.com/PacktPublishing/What-s-New-in-TensorFlow-2.0/issues/1",
      "the book's MNIST `Sequential` model trained on 0..255 pixels: accuracy stays near 11%",
      {'input_scale'}, epochs=3, lr=0.05)
def mnist_pixels_not_scaled(fixed):
    """Chapter 2's `end_to_end_sequential.py` (`Flatten`, `Dense(100, relu)` twice, `Dense(10, softmax)`,
    `categorical_crossentropy` on one-hot labels, SGD, batches of 32) left the pixels at 0..255; the reporter's fix: divide
    `x_train` and `x_test` by 255. The book's 50 steps at 5e-4 become 132 steps at 5e-2 here, so that the fixed twin learns"""
    x, y = _digit_images('byte')
    if fixed: x = x / 255
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 10),
                          nn.Softmax(dim=1))
    def categorical_crossentropy(p, t): return -(t * torch.log(p.clamp(1e-7, 1 - 1e-7))).sum(1).mean()
    return Learner(tensor_dls(x, F.one_hot(y, 10).float(), bs=32), _keras_init(model), loss_func=categorical_crossentropy,
                   opt_func=torch_opt(torch.optim.SGD))

def _series(n=1500, seed=0):
    "A daily series: two seasonalities, a slow trend, noise"
    g = _gen(seed)
    t = torch.arange(n, dtype=torch.float32)
    return torch.sin(2 * math.pi * t / 7) + 0.5 * torch.sin(2 * math.pi * t / 30) + t / n + 0.2 * torch.randn(n, generator=g)

@case("https://github.com/Nixtla/neuralforecast/issues/186",
      "missing values in the series' `y` column: windows and targets hold NaN, the loss turns NaN during training",
      {'nonfinite_input', 'nonfinite_target'}, epochs=3, lr=1e-3)
def nan_in_series(fixed):
    """neuralforecast trained on a `y` column with missing values, silently (the issue: the loss becomes NaN and the cause is
    hard to see; the issue proposes raising on NaN in `y`, which the user must fill). An MLP on 24 lags predicting the next value, MSE, Adam; the
    fixed twin interpolates the gaps"""
    y = _series()
    gaps = torch.rand(len(y), generator=_gen(1)) < 0.01
    y[gaps] = float('nan')
    if fixed:
        i = torch.arange(len(y))
        y[gaps] = torch.tensor(np.interp(i[gaps].numpy(), i[~gaps].numpy(), y[~gaps].numpy()), dtype=torch.float32)
    x = torch.stack([y[i:i + 24] for i in range(len(y) - 24)])
    model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 1))
    return Learner(tensor_dls(x, y[24:].unsqueeze(1), bs=32, shuffle=True), model, loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/prs-eth/Marigold/issues/111",
      "a few training images hold NaN pixels: the loss turns NaN at the first batch that holds one",
      {'nonfinite_input'}, epochs=2, lr=1e-3)
def nan_pixels_in_images(fixed):
    """Marigold's depth training gave a NaN loss; a user found it happens when the input batch contains NaN, the maintainer
    said check the data, and the reporter confirmed. A small convolutional depth regressor on 16×16 RGB images, MSE, Adam;
    the fixed twin drops the images that hold NaN"""
    g = _gen(2)
    depth = torch.rand(400, 1, 1, 1, generator=g) + torch.linspace(0, 1, 16).view(1, 1, 16, 1)
    x = torch.cat([depth, 1 - depth, depth * 0.5], 1).expand(-1, -1, -1, 16) + 0.1 * torch.randn(400, 3, 16, 16, generator=g)
    bad = torch.rand(400, generator=g) < 0.03
    x = x.clone(); x[bad, :, :4, :4] = float('nan')
    if fixed: x, depth = x[~bad], depth[~bad]
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))
    return Learner(tensor_dls(x, depth.expand(-1, -1, -1, 16).contiguous(), bs=16), model, loss_func=nn.MSELoss(),
                   opt_func=torch_opt(torch.optim.Adam))

@case("https://github.com/JeasunLok/ResNet-pytorch/issues/1",
      "the training images are normalised (mean, std) but the validation and test images are not: training accuracy fine, test accuracy very low",
      {'valid_at_chance', 'valid_input_shift'}, epochs=3, lr=3e-3)
def valid_set_not_normalised(fixed):
    """The repository's main.py normalised the training set only; the author's fix applies the same transforms to train and
    val/test. A small CNN with BatchNorm on the digits, Adam; the training set standardised, the validation set left at
    `ToTensor`'s 0..1. No layer misbehaves in training: only validation, and the inputs' statistics, show it"""
    x, y = _digit_images()
    xt, yt, xv, yv = _split(x, y)
    mean, std = xt.mean(), xt.std()
    xt = (xt - mean) / std
    if fixed: xv = (xv - mean) / std
    return Learner(_dls(xt, yt, xv, yv), _small_cnn(bn=True), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))

def _colour_images(n_per=150, n_classes=4, seed=0):
    "8×8 RGB images stored channels-last `(n, 8, 8, 3)`, as image files decode: class k a colour (its channel mix) in one quadrant"
    g, xs, ys = _gen(seed), [], []
    colours = torch.tensor([[1., 0, 0], [0, 1., 0], [0, 0, 1.], [1., 1., 0]])
    for k in range(n_classes):
        x = 0.3 * torch.randn(n_per, 8, 8, 3, generator=g)
        q = torch.randint(0, 4, (n_per,), generator=g)
        for i in range(n_per):
            r, c = 4 * (int(q[i]) // 2), 4 * (int(q[i]) % 2)
            x[i, r:r + 4, c:c + 4] += colours[k]
        xs.append(x); ys.append(torch.full((n_per,), k))
    return torch.cat(xs), torch.cat(ys)

class _ChannelsFirst(nn.Module):
    "Turns channels-last images `(n, h, w, c)` into `(n, c, h, w)`: by `permute` (right) or by `reshape` (the bug: pixels scrambled)"
    def __init__(self, permute=True):
        super().__init__(); self.permute = permute
    def forward(self, x):
        n, h, w, c = x.shape
        return x.permute(0, 3, 1, 2) if self.permute else x.reshape(n, c, h, w)

@case("https://github.com/Selen-Suyue/DensePolicy2D/issues/3",
      "channels-last images `(b, h, w, c)` turned into `(b, c, h, w)` by `reshape`, not `permute`: the convolutions see scrambled pseudo-images",
      {'input_layout'}, epochs=4, lr=3e-3)
def reshape_not_permute(fixed):
    """The policy's image encoder reshaped `b×h×w×c` camera images to `b×c×h×w`; the reporter showed that this mixes
    colours and positions, and the author switched to `permute`. A small CNN on channels-last colour images, Adam. No
    statistic of a layer tells a scrambled image from a real one: the model still learns, worse"""
    x, y = _colour_images()
    model = nn.Sequential(_ChannelsFirst(permute=fixed), _small_cnn(c_in=3, n_out=4))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- evaluation and the batches ----
class _SimpleNet(nn.Module):
    "SimpleNet's shape, scaled down: convolutions with BatchNorm, global max pooling, dropout, the classifier"
    def __init__(self, functional=True):
        super().__init__()
        self.features, self.functional = _small_cnn(bn=True)[:-3], functional
        self.drop, self.classifier = nn.Dropout2d(0.1), nn.Linear(32, 10)
    def forward(self, x):
        out = F.adaptive_max_pool2d(self.features(x), 1)
        out = F.dropout2d(out, 0.1, training=True) if self.functional else self.drop(out)
        return self.classifier(out.flatten(1))

@case("https://github.com/Coderx7/SimpleNet/issues/2",
      "`F.dropout2d(out, 0.1, training=True)` in `forward`: dropout stays on in evaluation, the same input gives a different output each run",
      {'eval_nondeterministic'}, epochs=3, lr=1e-2)
def functional_dropout_in_eval(fixed):
    """SimpleNet's `forward` called the functional dropout with `training=True`; the fix: an `nn.Dropout` module defined in
    `__init__`, which `model.eval()` turns off. On the digits, SGD with momentum. No statistic of a layer sees it: training
    is unchanged, validation is noisier"""
    x, y = _digit_images()
    return Learner(tensor_dls(x, y, bs=32), _SimpleNet(functional=not fixed), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9))

class _NoEvalMode(Callback):
    "The report's test loop never called `task_model.eval()`: the model stays in training mode while it is validated"
    order = 50
    def before_validate(self): self.learn.model.train()

@case("https://github.com/sinhasam/vaal/issues/2",
      "the test loop never calls `model.eval()` on a VGG16 with BatchNorm and dropout: validation runs in training mode",
      {'train_mode_in_eval'}, epochs=3, lr=0.05)
def validation_without_eval(fixed):
    """VAAL's `test` evaluated its `vgg16_bn` task model without `task_model.eval()`; the author added the call. A small VGG-like
    CNN (BatchNorm, dropout 0.5 in the head) on the digits, SGD with momentum; the bug kept as a callback that puts the model
    back in training mode before each validation. No statistic of a layer in training sees it"""
    x, y = _digit_images()
    model = nn.Sequential(*_small_cnn(bn=True)[:-1], nn.Dropout(0.5), nn.Linear(32, 10))
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9), cbs=[] if fixed else [_NoEvalMode()])

@case("https://github.com/fastai/fastai/issues/1352",
      "the training loader keeps its last, partial batch; it holds 1 image and the head's BatchNorm fails: `Expected more than 1 value per channel when training`",
      {'last_batch_one'}, epochs=2, lr=1e-3)
def last_batch_of_one(fixed):
    """The user trained senet154 (a head with `BatchNorm1d`) with a training loader without `drop_last`; after epoch 1 a batch
    of one sample reached BatchNorm. sgugger: use `drop_last=True` (fastai's default since). A small CNN with fastai's kind of
    head on the digits, 1,441 training images in batches of 32 (the last holds 1), Adam"""
    x, y = _digit_images()
    xt, yt, xv, yv = _split(x, y, n_valid=356)
    head = [nn.Flatten(), nn.BatchNorm1d(32), nn.Dropout(0.25), nn.Linear(32, 10)]
    model = nn.Sequential(*_small_cnn(bn=True)[:-2], *head)
    return Learner(_dls(xt, yt, xv, yv, drop_last=fixed), model, loss_func=nn.CrossEntropyLoss(),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- what the model is measured against ----
def _waveforms(n=400, length=256, sigma=5, shift=0, seed=0):
    """Three-component seismograms: noise, then a P arrival at a random sample (an onset of growing amplitude); labels as
    SeisBench's `ProbabilisticLabeller` makes them, a Gaussian of width `sigma` at the arrival (moved by `shift` samples),
    with a noise channel of 1 minus it"""
    g = _gen(seed)
    t, onset = torch.arange(length, dtype=torch.float32), torch.randint(40, length - 40, (n, 1), generator=g).float()
    after = (t >= onset).float()
    wave = 0.2 * torch.randn(n, 3, length, generator=g)
    wave += (after * torch.sin(0.6 * (t - onset)) * torch.exp(-(t - onset).clamp(min=0) / 60)).unsqueeze(1) * torch.rand(n, 3, 1, generator=g)
    p = torch.exp(-((t - onset - shift) ** 2) / (2 * sigma ** 2))
    return wave, torch.stack([p, 1 - p], 1)

@case("https://github.com/seisbench/seisbench/issues/181",
      "the labeller puts every P pick 1 sample before the arrival it labels: the model learns picks shifted by one sample",
      {'labels_misaligned'}, epochs=4, lr=3e-3)
def pick_labels_one_sample_early(fixed):
    """SeisBench's `ProbabilisticLabeller` (sigma 5) placed the labelled pick one sample before the metadata's arrival; the
    maintainer confirmed the off-by-one and fixed it. A small PhaseNet-like 1-d CNN (P and noise channels, a softmax over
    them per sample, the cross-entropy against the label curves), Adam. No statistic of a layer, nor the loss's course, can
    tell labels shifted by a sample: the model trains as well, on the wrong target"""
    x, y = _waveforms(shift=0 if fixed else -1)
    model = nn.Sequential(nn.Conv1d(3, 16, 7, padding=3), nn.ReLU(), nn.Conv1d(16, 16, 7, padding=3), nn.ReLU(),
                          nn.Conv1d(16, 2, 7, padding=3))
    def phasenet_loss(out, t): return -(t * F.log_softmax(out, dim=1)).sum(1).mean()
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=phasenet_loss, opt_func=torch_opt(torch.optim.Adam))
