"""Bug zoo, family 1: the model's output, the loss and the targets do not fit (and the loss itself). See `bugzoo.py`."""
from bugzoo import *

@case("https://discuss.pytorch.org/t/calculate-loss-between-a-target-in-one-hot-encoded-with-class-probabilities/180148",
      "a hand-written cross-entropy, `log(softmax(out))`, gives an infinite loss once a probability underflows to 0",
      {'nonfinite_loss'}, epochs=1, lr=1e-1)
def log_of_softmax(fixed):
    "The user's loss took the log of a softmax; the fix is `log_softmax` (here: `F.cross_entropy` on the logits)"
    def loss(out, y): return F.nll_loss(torch.log(F.softmax(out * 100, dim=1)), y)
    def fixed_loss(out, y): return F.cross_entropy(out * 100, y)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return Learner(digits_dls(bs=64), model, loss_func=fixed_loss if fixed else loss)

@case("https://techfeed.net/es/456718/ (Stack Overflow mirror: why does a binary Keras CNN always predict 1?)",
      "a binary classifier ends in `Dense(1)` and a softmax: its output is always 1, nothing learns",
      {'constant_output', 'output_classes', 'dead'}, epochs=2, lr=1e-2)
def softmax_over_one_unit(fixed):
    "Keras `Dense(1, activation='softmax')` with `binary_crossentropy`; the fix is a sigmoid"
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 1), nn.Sigmoid() if fixed else nn.Softmax(dim=1))
    return Learner(digits_dls(bs=64), model, loss_func=lambda out, y: keras_bce(out.squeeze(1), (y > 4).float()))
