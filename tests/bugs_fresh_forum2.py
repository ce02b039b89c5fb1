"""Bug zoo, a fresh family from forum threads (issue 45): threads on the PyTorch forums (discuss.pytorch.org) and the
fastai forums (forums.fast.ai) where a user's training misbehaved, a reply pointed at the cause and the user confirmed
the fix. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written before the case was ever
run under the tool. Cases were chosen for how common the bug is (a BatchNorm network tested one image at a time without
`model.eval()`, the BatchNorm layers of a pretrained body frozen along with the rest of it), never for whether the tool
catches it. Only threads whose stored copy holds the question, the answer and the user's confirmation were used; many
forum threads in our copy stop after the question, so fewer cases than asked for could be sourced. The first bug leaves
every statistic of training healthy (only evaluation is wrong): its docstring says so. Each bug was checked with plain
fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from fastai.torch_core import params
from bugzoo import *
from bugs_data import _dls, _split, _digit_images, _small_cnn
from bugs_fresh import _gen


# ---- modes: evaluation run in training mode ----
class _TestInTrainMode(Callback):
    "The thread's test loop: the model is never put in evaluation mode, so every validation image runs in training mode"
    order = 0   # after fastai's TrainEvalCallback, which calls `model.eval()` before validation
    def before_validate(self): self.model.train()

@case("https://discuss.pytorch.org/t/what-does-model-eval-do-for-batchnorm-layer/7146",
      "a BatchNorm CNN is tested one image at a time without `model.eval()`: each image is normalised by itself",
      {'train_mode_in_eval'}, epochs=4, lr=1e-2)
def batchnorm_single_image_test_in_train_mode(fixed):
    """'What does model.eval() do for batchnorm layer?': a user with the same problem, 'I trained a model using BN
    layer. If I just need to test one image, the BN layer will affect the result because of the change of batch size?';
    the reply: 'When evaluating you should use eval() mode and then batch size doesnt matter'; the user: 'Thanks~ I have
    solved the problem~'. In training mode a BatchNorm normalises with the statistics of the batch it is given: a batch
    of one image is normalised with that image's own mean and variance, which erases most of what tells the classes
    apart. The digits as 8×8 images, a small CNN with a BatchNorm after each convolution, cross-entropy, Adam at 1e-2,
    batches of 32 for training; validation one image at a time (batches of 1), run in training mode as the thread's test
    was; the twin validates in evaluation mode, as fastai does. Training is untouched: every statistic of training is
    healthy, only evaluation is wrong. Measured (plain fastai, 4 epochs): the training loss falls to 0.11 of its first
    in both runs (epochs' training losses 1.65, 1.01, 0.60, 0.38); the bug's validation loss rises from 2.38 to 2.59 at
    an accuracy of 0.087 every epoch (chance for 10 classes), the twin's falls from 1.50 to 0.61 at an accuracy of 0.46
    to 0.80"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split(x, y, n_valid=300)
    train = DataLoader([(xt[i], yt[i]) for i in range(len(xt))], bs=32, shuffle=True, drop_last=True)
    train.rng = random.Random(0)
    dls = DataLoaders(train, DataLoader([(xv[i], yv[i]) for i in range(len(xv))], bs=1))   # one image at a time
    return Learner(dls, _small_cnn(bn=True), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam), cbs=[] if fixed else [_TestInTrainMode()])


# ---- transfer learning: the BatchNorm layers of a frozen body ----
def _bn_body():
    "A small convolutional body with a BatchNorm after each convolution, pooled to 32 features"
    def block(i, o): return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 16), *block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten())

def _pretrained_bn_body(x, y, epochs=3, seed=1):
    "The body pretrained (plain PyTorch, Adam at 3e-3, batches of 32) on a source task: our ImageNet weights"
    torch.manual_seed(seed)
    body = _bn_body()
    model = nn.Sequential(body, nn.Linear(32, int(y.max()) + 1))
    opt, g = torch.optim.Adam(model.parameters(), 3e-3), _gen(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=g).split(32):
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(); loss.backward(); opt.step()
    return body

@case("https://forums.fast.ai/t/transfer-learning-in-fast-ai-how-does-the-magic-work/55620",
      "transfer learning with the pretrained body frozen, its BatchNorm layers included (`train_bn=False`)",
      {'frozen'}, epochs=8, lr=3e-2, fit='fit_one_cycle')
def transfer_learning_batchnorm_frozen(fixed):
    """'Transfer Learning in fast.ai - How does the magic work?': the same ResNet-50 (pretrained on ImageNet) and
    optimiser reached far lower accuracy in the user's TensorFlow and PyTorch ports than in fastai; after the replies'
    suggestions the user found 'where the magic is happening': 'The BatchNorm Layers in the pretrained model are
    trainable by default! In my TF/PyTorch experiments, I trained the models with frozen BatchNorm Layers. This was the
    reason for the different performance', and confirmed it in fastai: `cnn_learner(..., train_bn=False)` 'gives me only
    71% accuracy after 3 epochs (compared to 89%, when train_bn=True)'; 'It seems to be absolutely crucial to not freeze
    the BatchNorm layers'. A small BatchNorm CNN pretrained in `build` on the digits 0-4 (no downloads), then
    transferred to the digits 5-9 with inverted pixels (a new domain), a new linear head, the body frozen with
    `Learner.freeze()`, cross-entropy, fastai's Adam, `fit_one_cycle` at 3e-2; the bug passes `train_bn=False` as the
    thread's experiment did, the twin keeps fastai's default `train_bn=True`. fastai leaves the frozen BatchNorm
    layers in training mode, so their running statistics still follow the new domain: what the bug freezes is their
    weights and biases, which never change. Measured (plain fastai, 8 epochs): the
    bug's validation loss ends at 1.17 at an accuracy of 0.675 (training loss to 0.69 of its first), the twin's at 0.74
    at 0.815 (0.43 of its first)"""
    x, y = _digit_images('unit')
    src = y < 5
    body = _pretrained_bn_body(x[src], y[src])
    xt, yt, xv, yv = _split(1 - x[~src], y[~src] - 5, n_valid=200)
    model = nn.Sequential(body, nn.Linear(32, 5))
    learn = Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                    splitter=lambda m: [params(m[0]), params(m[1])], train_bn=fixed)
    learn.freeze()
    return learn
