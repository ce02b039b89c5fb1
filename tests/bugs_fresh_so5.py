"""Bug zoo, a fifth fresh family from Stack Overflow (issue 58): questions about a TensorFlow or Keras network that does
not learn (accuracy at chance, the same output for every input), each with the answer that named the bug. See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever
run under the tool. Cases were chosen for how common the bug is (every weight initialised to zero, a cross-entropy
summed over a batch made larger, pixels left at 0..255), never for whether the tool catches it. Each bug was checked
with plain fastai before any run under the tool: it shows its thread's symptom, and its fixed twin trains.

The search was asked for four cases and found three it could port. The stored copy of Stack Overflow itself holds few
such questions; most pages found were generated checklists with no thread behind them, or copies of Stack Overflow at
other addresses (machine translations among them) that keep the answer but not always the question's code, its question
number or whether the answer was accepted; each docstring says where the thread was read and what that copy lacks.
Threads already cited by another family (Cross Validated 367057, Data Science Stack Exchange 28481) were left out, and
so was a thread whose bug (a test image not divided by 255 like the training images) did not show in the port: a ReLU
network with zero biases is nearly blind to a rescaling of its inputs, so the validation accuracy did not drop."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _keras_init


# ---- the initialisation: every weight and bias zero, a softmax on the hidden layer ----
class _ZeroSoftmaxNet(nn.Module):
    """The thread's two-layer network: 64 inputs, a hidden layer of 10 units through a softmax (the answer's fix: a
    sigmoid), 10 outputs; every weight and bias zero (the fix: truncated normal, standard deviation 0.1)"""
    def __init__(self, fixed):
        super().__init__()
        self.hidden, self.out = nn.Linear(64, 10), nn.Linear(10, 10)
        self.act = nn.Sigmoid() if fixed else nn.Softmax(dim=1)
        for p in (*self.hidden.parameters(), *self.out.parameters()):
            if fixed: nn.init.trunc_normal_(p, std=0.1, a=-0.2, b=0.2)   # `tf.truncated_normal(..., stddev=0.1)`
            else: nn.init.zeros_(p)                                       # `tf.Variable(tf.zeros(...))`
    def forward(self, x): return self.out(self.act(self.hidden(x)))

@case("http://pullrequest.ru/11818227/neironnaya-set-odnim-skrytym-sloem-mozhet-byt-obuchena",
      "a two-layer TensorFlow network has every weight and bias initialised to zero and a softmax on its hidden layer: "
      "the hidden units stay identical, no gradient reaches the first layer and the output is the same for every input",
      {'gradient_flow', 'constant_output'}, epochs=20, lr=0.5)
def zero_init_softmax_hidden_layer(fixed):
    """'A neural network with one hidden layer cannot be trained' (a Stack Overflow question, read in a Russian machine
    translation at pullrequest.ru that keeps the answer, with the question's layers quoted in it, but not the rest of
    the question, its number or whether the answer was accepted): `W1 = tf.Variable(tf.zeros([784,10]))`,
    `b1 = tf.Variable(tf.zeros([10]))`, `out1 = tf.nn.softmax(tf.matmul(x, W1) + b1)`, and `W2`, `b2` zeros too.
    The answer (our translations of the Russian): 'Do not initialise the model with all zeros', the gradient there 'is
    probably also zero', so 'your parameters simply will not change'; use a random initialisation
    (`tf.truncated_normal(..., stddev=0.1)` for every weight and bias), and a sigmoid in place of the hidden softmax,
    whose outputs are forced to sum to one, a constraint that 'made the model stop learning'. With zeros every hidden
    unit computes the same value (0.1), the output layer's weights from every hidden unit receive the same updates, and
    the gradient a softmax passes back from equal upstream gradients is zero: the first layer never moves. Ported to
    the digits scaled to [0, 1] (64 pixels for MNIST's 784); the thread's loss and optimiser are not in the copy: a
    softmax cross-entropy on the output and plain SGD at 0.5 on batches of 100, as in TensorFlow's MNIST tutorial the
    question builds on. The twin makes both of the answer's changes. Measured (20 epochs): the first layer's weights
    stay below 1e-10 in absolute value, every validation prediction is the same class, the training loss stays at 2.30
    (loss ratio 1.00), the validation loss at 2.31 and accuracy at 0.086; the twin's loss falls from 2.30 to 0.76
    (ratio 0.34), its validation loss to 0.76 and accuracy to 0.84"""
    x, y = digits_raw()
    return Learner(tensor_dls(x / 16, y, bs=100), _ZeroSoftmaxNet(fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.SGD))


# ---- the loss: a cross-entropy summed over a batch made larger ----
def _large_digits():
    "The digits scaled to [0, 1] and enlarged to 16×16 (each pixel repeated 2×2): 256 inputs, squares summing to ~60"
    x, y = digits_raw()
    x = (x / 16).view(-1, 1, 8, 8).repeat_interleave(2, 2).repeat_interleave(2, 3)
    return x.flatten(1), y

class _SoftmaxRegression(nn.Module):
    "TensorFlow's beginner MNIST model: `y = tf.nn.softmax(tf.matmul(x, W) + b)`, `W` and `b` zeros; probabilities out"
    def __init__(self, n_in=256):
        super().__init__()
        self.lin = nn.Linear(n_in, 10)
        nn.init.zeros_(self.lin.weight); nn.init.zeros_(self.lin.bias)
    def forward(self, x): return F.softmax(self.lin(x), 1)

def _summed_log_ce(p, y):
    "The tutorial's loss: `-tf.reduce_sum(y_*tf.log(y))`, summed over the batch, the log taken of the probabilities"
    return -(F.one_hot(y, p.shape[1]) * torch.log(p)).sum()

@case("https://stackoverflow.com/questions/33641799",
      "TensorFlow's beginner MNIST example sums its cross-entropy over the batch and steps plain gradient descent at "
      "0.01: with batches larger than ~200 the steps overshoot, the loss blows up and turns NaN",
      {'loss_summed', 'lr_too_high', 'loss_diverging', 'nonfinite_loss'}, epochs=60)
def summed_cross_entropy_large_batch(fixed):
    """'Why does TensorFlow example fail when increasing batch size?' (read in copies at stackoverflow.org.cn and
    geek-qa.imtqy.com, which keep the question number and the answers; whether this one was accepted is not in them): in
    the beginner MNIST example (`tf.nn.softmax(tf.matmul(x, W) + b)`, `cross_entropy = -tf.reduce_sum(y_*tf.log(y))`,
    `GradientDescentOptimizer(0.01)`, batches from `mnist.train.next_batch(100)`), larger batches fail: 'It works until
    204, but in 205 and any higher quantity I tried, the accuracy will end <10%' (the geek-qa copy's wording). The
    answer printed the cross-entropy: about 90 at 204, but at 205 it climbs from 472 to 1796 and then NaN: 'the large
    batch size creates such a huge gradient that your model gets out of control - the updates that it applies are too
    large'; the fixes it gives: lower the learning rate from 0.01 to 0.005 (final accuracy 0.92), or a better optimiser.
    The loss is a sum over the batch, so its gradient, and the step, grows with the batch. Ported: the digits enlarged
    to 16×16 so that an image's squared pixels sum to about 60 (MNIST's to about 90; with the digits' 64 pixels the
    threshold lies beyond the training set), the tutorial's zero-initialised softmax regression and summed loss, plain
    SGD at 0.01, batches of 400; the twin steps at the answer's 0.005. At batches of 200 the rate 0.01 still trains
    (validation accuracy 0.967), as at 204 in the thread (a run of ~290 steps). Measured (60 epochs, 3 batches each):
    the loss goes 921, 559, 5610, then NaN from the fourth step on, and the validation accuracy is 0.106 (every
    prediction NaN); the twin's loss falls from 921 to ~27 (loss ratio 0.025; validation accuracy 0.97)"""
    x, y = _large_digits()
    return Learner(tensor_dls(x, y, bs=400), _SoftmaxRegression(), loss_func=_summed_log_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.SGD), lr=0.005 if fixed else 0.01)


# ---- the inputs: pixels left at 0..255 ----
def _small_keras_cnn():
    "A small Keras-style CNN for 8×8 images: two 3×3 convolutions, pooling, a dense layer of 128, a softmax"
    return _keras_init(nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, 10), nn.Softmax(dim=1)))

@case("https://xue-jishu.com/wu-lun-shu-ru-ru-he-keras-shang-de-cnns-dou-shou-lian-dao-xiang-tong-de-zhi",
      "a Keras CNN is trained on CIFAR-10 pixels left at 0..255: the updates are huge, the softmax saturates and the "
      "network returns the same answer whatever the input",
      {'input_scale'}, epochs=5, lr=1e-3)
def keras_cnn_raw_pixels_same_output(fixed):
    """'CNNs on Keras converge to the same value no matter the input' (a Stack Overflow question, read in a Chinese
    translation at xue-jishu.com that keeps the question's text and the answer but not the question's number, its code,
    which it linked elsewhere, or whether the answer was accepted; the answer alone is also at pullrequest.ru/10248037):
    learning Keras with CNNs on CIFAR-10, the model 'returns the same result for every input, whatever the input' (our
    translations of the Chinese). The answer: 'You forgot to normalise the images', the values of `x_train` lie in
    [0,255], which 'makes the gradient updates too large and stalls the training'; the fix:
    `x_train.astype('float32') / 255` (or per-pixel standardisation with the training set's mean and deviation). The
    question's model is not in the copy. Ported: the digits as 8×8 images at 0..255 (the file's 0..16 times 255/16), a
    small CNN of our choosing with Keras's initialisation (two convolutions of 32 and 64, pooling, dense 128, softmax),
    Keras's cross-entropy on probabilities, Adam at Keras's default 1e-3, batches of 32; the twin divides by 255. The
    symptom depends on the network: a deeper one with dropout (Keras's CIFAR-10 example, scaled down) learnt from the
    raw pixels in the port, this one does not. Measured (5 epochs): the loss stays at 12 to 13 (loss ratio 0.96;
    Keras's clipped log of 1e-7 is 16.1), the validation loss at 13.3 and accuracy at 0.18, every prediction one of two
    classes with probabilities of 0 or 1; the twin's loss falls from 2.28 to 0.05 (ratio 0.025, validation accuracy
    0.98)"""
    x, y = digits_raw()
    x = (x * (255 / 16)).round().view(-1, 1, 8, 8)
    if fixed: x = x / 255
    return Learner(tensor_dls(x, y, bs=32), _small_keras_cnn(), loss_func=keras_ce, metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam, eps=1e-7))
