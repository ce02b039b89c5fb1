"""Bug zoo, a twelfth GitHub family (issue 45): from the issues of model-zoo and segmentation repositories no other
family cites (MMSegmentation, denoising-diffusion-pytorch, YOLOv5, voicebox-pytorch). See `bugzoo.py`. Each case cites
its thread; its truth (`kinds`, `layer`) was written before the case was ever run under the tool. Cases were chosen for
how common the bug is (binary masks saved as 0 and 255 where 255 is the segmentation loss's ignore index, images of
0..255 given to a diffusion model that expects 0..1, a dummy forward pass in `.train()` mode that feeds garbage to the
BatchNorm statistics, a rotary position embedding applied with its arguments swapped), never for whether the tool
catches it. The ignored foreground leaves every layer's statistics healthy (the loss falls, only the targets reaching it
are one class); the saturated attention lives inside `scaled_dot_product_attention`, the output of no module: their
docstrings say so. Each bug was checked with plain fastai (no fastexplorer) before any run under the tool: it shows its
thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _gen, _blobs, _tiny_unet, _dls, _split, _digit_images, _small_cnn


# ---- targets: the foreground's label is the loss's ignore index ----
def _fg_iou(out, m):
    "The foreground's IoU: pixels predicted as class 1 against pixels whose mask is not 0 (1 fixed, 255 as the bug had)"
    pred, true = out.argmax(1) == 1, m != 0
    inter, union = (pred & true).sum().float(), (pred | true).sum().float()
    return inter / union if union > 0 else torch.tensor(0.)

def _seg_ce(out, m): return F.cross_entropy(out, m, ignore_index=255)   # MMSegmentation's `CrossEntropyLoss`

@case("https://github.com/open-mmlab/mmsegmentation/issues/1609",
      "a binary segmentation's masks mark the foreground 255, which is the cross-entropy's ignore index: the "
      "foreground pixels never reach the loss",
      {'ignored_class', 'labels_one_class'}, epochs=8, lr=1e-2)
def seg_foreground_255_ignored(fixed):
    """'two class segmentation (label 0,255), the iou =0, acc = nan': 'During training, the IOU=0, Acc=nan of the target
    class, the background is 100, and the loss cannot be reduced'; 'My labels are 0 and 255 (background, target), is it
    because 0 and 1 are not used?' The maintainer: 'Because `255` would be automatically ignored' (MMSegmentation's
    `ignore_index=255`, meant for unlabelled pixels), and the fix: rewrite the annotations with 1 for the foreground, as
    its DRIVE dataset does. Every foreground pixel is dropped from the loss, so the network learns that all is
    background. Nothing is wrong with the network or its gradients, and the loss falls: only the targets that reach the
    loss, one class, show the bug. Noisy 16×16 images with 1 to 3 bright rectangles (11% of the pixels), the zoo's
    two-level U-Net with two output maps, MMSegmentation's cross-entropy (`ignore_index=255`), SGD with momentum 0.9 and
    weight decay 5e-4 at 0.01 as MMSegmentation's schedules, batches of 8; the bug stores the masks as 0/255, the twin
    as 0/1; the metric is the foreground's IoU. Measured (seeds 0 and 1) over 8 epochs: the foreground IoU is 0.0 after
    every epoch, the network predicts no foreground pixel at all (12% of the validation pixels are foreground; pixel
    accuracy 0.88), while the loss, over background pixels only, falls to 0.014 and 0.009 of its first (the thread's
    stalled loss was a Dice loss); the twin reaches a foreground IoU of 0.91 and 0.89 (pixel accuracy 0.99), its batch
    losses ending at 0.093 and 0.081 of their first"""
    x, m = _blobs()
    if not fixed: m = m * 255
    return Learner(tensor_dls(x, m, bs=8), _tiny_unet(), loss_func=_seg_ce, metrics=_fg_iou,
                   opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=5e-4))


# ---- inputs: a diffusion model fed pixels of 0..255 where it expects 0..1 ----
class _TimeMLP(nn.Module):
    "The denoiser: the noisy 8×8 image flattened, a sinusoidal embedding of the step, two hidden layers, the noise out"
    def __init__(self, d=64, hidden=256, t_dim=32):
        super().__init__()
        self.t_dim = t_dim
        self.net = nn.Sequential(nn.Linear(d + t_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, d))
    def forward(self, x, t):
        half = self.t_dim // 2
        f = torch.exp(-math.log(10000) * torch.arange(half) / half)
        e = t[:, None].float() * f[None]
        return self.net(torch.cat([x.flatten(1), e.sin(), e.cos()], 1)).view_as(x)

class _GaussianDiffusion(nn.Module):
    """denoising-diffusion-pytorch's `GaussianDiffusion`, scaled down: images expected in [0, 1] are mapped to [-1, 1]
    (`normalize_to_neg_one_to_one`), a step `t` and Gaussian noise are drawn per image, the image is noised as
    `sqrt(ᾱ_t) x + sqrt(1 - ᾱ_t) ε` (linear betas 1e-4 to 0.02 over 1000 steps), and the model predicts `ε`; the noise
    drawn is kept in `noise` for the loss"""
    def __init__(self, model, timesteps=1000):
        super().__init__()
        self.model, self.T = model, timesteps
        self.register_buffer('abar', torch.cumprod(1 - torch.linspace(1e-4, 0.02, timesteps), 0))
    def forward(self, img):
        x0 = img * 2 - 1
        t = torch.randint(0, self.T, (len(x0),))
        self.noise = torch.randn_like(x0)
        a = self.abar[t].view(-1, *([1] * (x0.dim() - 1)))
        return self.model(a.sqrt() * x0 + (1 - a).sqrt() * self.noise, t)

def _noise_l1(diffusion):
    "The repository's `loss_type='l1'`: the mean absolute error between the predicted noise and the noise drawn"
    def loss(pred, img): return F.l1_loss(pred, diffusion.noise)
    return loss

@case("https://github.com/lucidrains/denoising-diffusion-pytorch/issues/20",
      "images of pixel values 0..255 are given to a diffusion model that expects 0..1: the noised inputs are hundreds "
      "of times the noise, and the loss stays at that of predicting no noise",
      {'input_scale'}, epochs=5, lr=1e-3)
def diffusion_images_not_scaled(fixed):
    """'Outputs fixed in [-1,1] range': 'My images are all square ... and pixel values are between 0-255'; the samples
    looked like noise and 'during training my loss is stuck around 0.8'. The reporter then found the repository's
    scaling: `GaussianDiffusion` maps images from [0, 1] to [-1, 1], and 'I see in the included Dataset that it is
    scaled' (its `ToTensor` gives [0, 1]); closed. With pixels of 0..255 the noised image `sqrt(ᾱ) x + sqrt(1 - ᾱ) ε` is
    dominated by the image at every step, the noise cannot be read off it, and the best the model can do is predict
    none: an L1 loss of E|ε| = 0.80. The digits as 8×8 images (0..1, as `ToTensor` gives; the bug multiplies them back
    to 0..255), the repository's `GaussianDiffusion` scaled down (1000 steps, linear betas, noise prediction, the
    user's `loss_type='l1'`), a denoising MLP with a sinusoidal step embedding (64+32-256-256-64, SiLU) in place of the
    U-Net, Adam at 1e-3 (the user's 1e-4 was for 2,500 steps and more). Measured (seeds 0 and 1): the noised inputs have
    a spread of 116 (up to 509) against the twin's 0.95; the batch losses fall from 1.6 and 1.4 to 0.80 and stay there
    (0.49 and 0.57 of their first), the validation loss is 0.80 after every epoch of 5, and the predicted noise averages
    0.03 in size (the twin's 0.69); the twin's validation loss falls from 0.69 to 0.30 and 0.32, its batch losses ending
    at 0.40 and 0.41 of their first"""
    x, _ = digits_raw()
    img = (x / 16).view(-1, 1, 8, 8)
    if not fixed: img = (img * 255).round()
    diffusion = _GaussianDiffusion(_TimeMLP())
    return Learner(tensor_dls(img, img, bs=32), diffusion, loss_func=_noise_l1(diffusion),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- evaluation: BatchNorm statistics fed uninitialised memory before training ----
def _uninitialised(shape, seed=0):
    """What `torch.empty` may hand back: memory never written, here arbitrary 32-bit patterns read as float32 (a fixed
    generator, so that the run is repeatable): most values tiny or astronomically large (Inf or NaN possible, none
    here)"""
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, shape, dtype=torch.int64, generator=_gen(seed)).to(torch.int32)
    return bits.view(torch.float32)

class _GraphLog(Callback):
    """YOLOv5's TensorBoard graph logging at the start of training (`log_tensorboard_graph`): one forward pass of a
    dummy image through the model as it is, in `.train()` mode, without a gradient. As the bug had it the image comes
    from `torch.empty` (`empty=True`); as fixed, from `torch.zeros`"""
    order = 0
    def __init__(self, empty): self.empty = empty
    def before_fit(self):
        shape = (1, *self.dls.train.one_batch()[0].shape[1:])
        im = _uninitialised(shape) if self.empty else torch.zeros(shape)
        with torch.no_grad(): self.learn.model(im)   # the model is still in `.train()` mode here

@case("https://github.com/ultralytics/yolov5/issues/9059",
      "a dummy image from `torch.empty` is run through the model in `.train()` mode before training: the first "
      "BatchNorm adds uninitialised memory to its running statistics, and evaluation gives every image the same output",
      {'eval_stats_stale', 'nonfinite'}, layer='1', epochs=5, lr=3e-3)
def bn_stats_from_empty_tensor(fixed):
    """'Zero-mAP bug: P, R and mAP are all 0.0': a contributor found the commit by `git bisect` (the bug showed in about
    a third of the runs); the maintainer: one op 'ran a torch.empty() tensor through the model when it was in .train()
    mode', so that the BatchNorms tracked uninitialised values, 'leading some batchnorm layers to randomly output NaN';
    fixed by #9068, whose TensorBoard graph logging builds its dummy image with `torch.zeros` (merged). Training uses
    each batch's own statistics and is untouched; only evaluation, which uses the running statistics, breaks. The digits
    as 8×8 images (0..1, 360 held out), a small CNN with two BatchNorms (conv, BN, ReLU twice, pooling, a linear head),
    cross-entropy, Adam at 3e-3; before the first batch a callback runs one dummy image through the model in `.train()`
    mode without a gradient, as `log_tensorboard_graph` did. Uninitialised memory is emulated by random 32-bit patterns
    read as float32 (a fixed generator: most values tiny or up to 1e38; the real `torch.empty` sometimes held zeros,
    hence a third of the runs); the twin's dummy image is zeros. Measured (seeds 0 and 1): after the dummy pass the
    first BatchNorm's running variance is Inf in all 16 channels and its running mean reaches 3e33 and 4e33 (the
    second BatchNorm's stay finite; Inf here where the thread saw NaN); the training batch losses are the twin's exactly
    (ending at 0.28 and 0.26 of their first), but in evaluation the first BatchNorm gives its bias whatever the image,
    every validation image gets the same output and one class (accuracy 0.106, and 0.086 to 0.106, over 5 epochs: the
    share of that class), and the validation loss climbs from 2.7 and 2.4 to 9.6 and 7.9; the twin's validation loss
    ends at 0.55 and 0.88 (accuracy 0.92 and 0.69)"""
    x, y = _digit_images()
    xt, yt, xv, yv = _split(x, y, n_valid=360)
    return Learner(_dls(xt, yt, xv, yv, bs=32), _small_cnn(bn=True), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[_GraphLog(empty=not fixed)])


# ---- attention: the rotary embedding applied with its arguments swapped ----
def _masked_signals(n=1000, length=32, d=8, seed=0):
    """Voicebox's task, scaled down: frames of `d` smooth channels (each a sum of three random sinusoids), a span of 4
    to 8 frames masked out (zeroed, with a flag channel saying which); the model infills the span. Inputs `(n, length, d
    + 1)`; targets the clean frames with the mask as a last channel"""
    g = _gen(seed)
    t = torch.arange(length).float()
    freq, phase = torch.rand(n, d, 3, generator=g) * 0.4 + 0.05, torch.rand(n, d, 3, generator=g) * 2 * math.pi
    amp = torch.randn(n, d, 3, generator=g)
    x = (amp[..., None] * torch.sin(freq[..., None] * t + phase[..., None])).sum(2).transpose(1, 2) / 1.7
    m = torch.zeros(n, length, 1)
    for i in range(n):
        s, w = int(torch.randint(2, length - 10, (1,), generator=g)), int(torch.randint(4, 9, (1,), generator=g))
        m[i, s:s + w] = 1.
    return torch.cat([x * (1 - m), m], -1), torch.cat([x, m], -1)

def _span_mse(out, y):
    "The mean squared error over the masked frames only, as Voicebox's loss is taken over the masked span"
    m = y[..., -1:]
    return (((out - y[..., :-1]) ** 2) * m).sum() / (m.sum() * out.shape[-1])

def _rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat([-b, a], -1)

def _apply_rotary(pos, t): return t * pos.cos() + _rotate_half(t) * pos.sin()   # the repository's signature: pos first

class _RotaryAttention(nn.Module):
    """Voicebox's `Attention`: queries, keys and values from one linear map, rotary position embeddings on the queries
    and keys, scaled dot-product attention. As the bug had it the embedding is applied as `apply_rotary_pos_emb(t,
    pos)`: the queries and keys are replaced by `pos·cos(q) + rotate_half(pos)·sin(q)`, the positions scaled by
    functions of the content; as fixed, `apply_rotary_pos_emb(pos, t)`"""
    def __init__(self, dim, heads=4, dim_head=16, swapped=False):
        super().__init__()
        self.heads, self.swapped = heads, swapped
        self.to_qkv = nn.Linear(dim, heads * dim_head * 3, bias=False)
        self.to_out = nn.Linear(heads * dim_head, dim, bias=False)
    def forward(self, x, pos):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in self.to_qkv(x).chunk(3, -1))
        if self.swapped: q, k = _apply_rotary(q, pos), _apply_rotary(k, pos)
        else: q, k = _apply_rotary(pos, q), _apply_rotary(pos, k)
        return self.to_out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, -1))

class _Block(nn.Module):
    "A pre-norm transformer block: rotary attention and a GELU feed-forward, each added back"
    def __init__(self, dim, swapped):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = _RotaryAttention(dim, swapped=swapped)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
    def forward(self, x, pos):
        x = x + self.attn(self.norm1(x), pos)
        return x + self.ff(self.norm2(x))

class _Infiller(nn.Module):
    "Frames projected to width 64, two transformer blocks sharing one rotary embedding (`dim_head` 16), projected back"
    def __init__(self, swapped, d=8, dim=64, depth=2, dim_head=16):
        super().__init__()
        self.register_buffer('inv_freq', 1 / 10000 ** (torch.arange(0, dim_head, 2).float() / dim_head))
        self.proj_in, self.proj_out = nn.Linear(d + 1, dim), nn.Linear(dim, d)
        self.blocks = nn.ModuleList([_Block(dim, swapped) for _ in range(depth)])
    def forward(self, x):
        f = torch.arange(x.shape[1]).float()[:, None] * self.inv_freq[None]
        pos = torch.cat([f, f], -1)   # Voicebox's `RotaryEmbedding.forward`
        h = self.proj_in(x)
        for blk in self.blocks: h = blk(h, pos)
        return self.proj_out(h)

@case("https://github.com/lucidrains/voicebox-pytorch/issues/13",
      "the rotary embedding is applied as `apply_rotary_pos_emb(t, pos)` instead of `(pos, t)`: queries and keys "
      "become the positions scaled by cosines of the content, attention saturates on positions, and the masked span "
      "is never learnt",
      {'saturated', 'loss_stalled'}, epochs=5, lr=1e-3)
def rotary_embedding_arguments_swapped(fixed):
    """'a mistake in rotary embbeding', pointing at `q, k = map(lambda t: apply_rotary_pos_emb(t, rotary_emb), (q, k))`
    where the function is `apply_rotary_pos_emb(pos, t)`; a user: 'The previous code was not trained. Changing to this
    code seems to be learning well from the first epoch'; fixed by #14, 'fix a mistake', which passes the embedding
    first (merged: 'good catch!'). With the arguments swapped the queries and keys are the position angles (up to the
    sequence's length) weighted by cosines and sines of the content: attention logits in the hundreds, a softmax pinned
    on a few positions, and the masked span is never infilled from its context. The saturated softmax is inside
    `scaled_dot_product_attention`, the output of no module: a statistic of module outputs sees only its results.
    Voicebox's task scaled down: 1,000 sequences of 32 frames of 8 smooth channels (sums of random sinusoids), a span of
    4 to 8 frames zeroed with a flag channel marking it, the loss the squared error over the span only; two pre-norm
    transformer blocks (width 64, 4 heads of 16) with the repository's rotary embedding and `apply_rotary_pos_emb`,
    Adam at 1e-3. Measured (seeds 0 and 1): the attention's largest weight averages 0.83 to 0.85 with mean |logit| 79 to
    132 (the twin's 0.09 to 0.24 and 0.6 to 1.8); the validation loss stays at 0.52 to 0.54 over 5 epochs (predicting 0
    scores 0.50) while the batch losses end at 0.87 and 0.86 of their first, and the span outputs vary 0.14 to 0.17
    across samples (targets 0.69); the twin's validation loss falls from 0.54 to 0.34 and from 0.52 to 0.21, its batch
    losses ending at 0.58 and 0.38 of their first"""
    x, y = _masked_signals()
    return Learner(tensor_dls(x, y, bs=32), _Infiller(swapped=not fixed), loss_func=_span_mse,
                   opt_func=torch_opt(torch.optim.Adam))
