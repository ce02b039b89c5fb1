"""Bug zoo, a fresh family from the PyTorch forums (discuss.pytorch.org) and the fastai forums (forums.fast.ai): threads
where a user's training misbehaved and a reply found the bug in their code. See `bugzoo.py`. Each case cites its thread;
its truth (`kinds`, `layer`) was written before the case was ever run, under the tool or not. Cases were chosen for how
common the bug is, never for whether the tool catches it. The stored copies of forum threads that this session could
search hold, for most threads, only the opening post: a case is kept only where the copy also holds the reply that names
the bug, and its docstring says whether the user's confirmation is in that copy. Each bug was checked with plain fastai
before any run under the tool: it shows its thread's symptom, and its fixed twin trains."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _digit_images


# ---- the output and the loss ----
def _cifar_style_cnn(softmax:bool):
    """The thread's network scaled to 8×8 images: three 3×3 convolutions (16, 32, 64 filters) with ReLU, an average
    pool over the whole map, a linear layer to the 10 classes and, in the bug, `nn.Softmax(dim=1)` last (at '6')"""
    return nn.Sequential(nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU()),
                         nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()),
                         nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU()),
                         nn.AvgPool2d(8), nn.Flatten(), nn.Linear(64, 10), *([nn.Softmax(dim=1)] if softmax else []))

@case("https://discuss.pytorch.org/t/why-does-data-augmentation-decrease-validation-accuracy-pytorch-keras-comparison/29297",
      "a CIFAR-10 CNN ends in `nn.Softmax(dim=1)` and trains under `nn.CrossEntropyLoss`, which applies its own: "
      "validation accuracy stalls far below the same network's in Keras",
      {'output_activation'}, layer='6', epochs=6, lr=0.01)
def cifar_cnn_softmax_into_cross_entropy(fixed):
    """'Why does data augmentation decrease validation accuracy: pytorch/keras comparison': a CNN for CIFAR-10 whose
    last layers are `nn.AvgPool2d(8)`, `nn.Linear(256, num_classes)`, `nn.Softmax(dim=1)`, trained with
    `nn.CrossEntropyLoss` and SGD (lr 0.01, momentum 0.9, weight decay 5e-4) for 20 epochs: 'my validation accuracy
    decreases from 60% to 50%', while 'when I train this network on keras ... I can reach over 70% validation accuracy'.
    The reply (ptrblck): 'If you use nn.CrossEntropyLoss you should pass the logits into this criterion'; the stored
    copy of the thread ends there, so the user's own confirmation is not in it. Keras's categorical cross-entropy takes
    probabilities, so the same softmax is right there and wrong here: the loss softmaxes the probabilities again, its
    floor is -log(e/(e+9)) = 1.46 and its gradients shrink by the softmax's Jacobian. The digits as 8×8 images,
    standardised (the thread normalises), the thread's network scaled down (three convolutions of 16-32-64 filters, a
    global average pool, a linear head), its optimiser and learning rate, batches of 16 (the copy does not give the
    thread's); the twin drops the softmax. Measured (6 epochs, one CPU thread, 5-8 s): the training loss stays at 2.30
    (ln 10; last over first 1.00) and validation accuracy at chance (0.11 to 0.18), a stronger form of the thread's
    stall; the twin's loss falls to 0.66 of its first (validation loss 1.41, accuracy 0.49 and rising)"""
    x, y = _digit_images('unit')
    xt, yt, xv, yv = _split((x - x.mean()) / x.std(), y, n_valid=360)
    return Learner(_dls(xt, yt, xv, yv, bs=16), _cifar_style_cnn(softmax=not fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD, momentum=0.9, weight_decay=5e-4))
