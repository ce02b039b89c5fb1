"""Bug zoo, a tenth Stack Overflow family (issue 62): data and label pipeline bugs from the Stack Exchange sites, each
with the answer that named the bug. See `bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was
written before the case was ever run under the tool. Cases were chosen for how common the bug is (a split taken off the
end of data sorted by label, a per-sample preprocessing step that breaks the correspondence between the samples),
never for whether the tool catches it. Each bug was checked with plain fastai (no fastexplorer) before any run under
the tool: it shows its thread's symptom, and its fixed twin trains.

As for the ninth family, the search found few threads whose stored copies hold both the question and the answer that
names the cause: most hits were generated checklists and tutorials, or mirrors that keep the question only (the
sentiment tweets split by `validation_split` off the end of positives-then-negatives, datascience 29893, and the
shuffled test generator compared to `generator.classes`, Stack Overflow 48883170, were left out for that reason), and
several bugs the zoo already holds from another thread (targets outside a logistic output's range, R's `nnet`).
Hence two cases, not six."""
from fastai.metrics import accuracy
from bugzoo import *
from bugs_data import _dls, _split, _gen


# ---- the split: the test rows taken off the end of data sorted by label ----
@case("https://datascience.stackexchange.com/questions/64623",
      "`train_test_split(..., shuffle=False)` on data sorted by label: the held-out rows are the last classes, which "
      "the training rows hold too few of, or none",
      {'valid_classes_unseen'}, epochs=5, lr=1e-3)
def split_taken_off_sorted_labels(fixed):
    """'Inconsistency occurred when using cross_val_score in python': the held-out score of a classifier on iris is far
    below its cross-validated one. The answer: 'One reason might be your train_test_split() setup. Using shuffle=False
    means you just use the first 80% examples of your data to train with no randomness ... the iris dataset is sorted
    by its classes from 0 to 2. This means your train_test_split() will be unbalanced since class 2 will be
    underrepresented ... And even worse your test data only has one class'; with `stratify=y` (shuffled) the score is
    1.0. Ported to the digits sorted by label as iris is (ten classes, so the last fifth is all of the nines and nearly
    all of the eights, which the training rows then lack), standardised pixels, an MLP (64-64-10), cross-entropy, Adam
    at 1e-3, batches of 32; the bug holds out the last 20% of the sorted rows, the twin a stratified random 20%
    (`train_test_split(..., stratify=y)`). The network is healthy and learns what it is shown; only the split is wrong,
    which no per-layer statistic of training can see (the validation targets can). Where the thread's training rows
    kept a few of the last class, the digits' last fifth takes all of two classes. Measured (seeds 0 and 1) over 5
    epochs: the bug trains on the digits 0 to 7 only and validates on 5 sevens, 174 eights and 180 nines; its batch
    losses fall to 0.062 and 0.063 of their first while its validation loss is 7.99 and 7.54 and its validation
    accuracy 0.014 at both seeds (the sevens); the twin trains and validates on all ten classes, its batch losses ending
    at 0.126 and 0.121 of their first, its validation loss 0.245 and 0.246 (accuracy 0.961 and 0.955)."""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    order = torch.argsort(y, stable=True)                      # the file sorted by its classes, as iris is
    x, y = x[order], y[order]
    n_valid = int(0.2 * len(x))
    if fixed:                                                  # stratified and shuffled: a fifth of each class
        g, held = _gen(0), []
        for c in range(10):
            i = (y == c).nonzero().flatten()
            held.append(i[torch.randperm(len(i), generator=g)[:round(0.2 * len(i))]])
        held = torch.cat(held)
        keep = torch.ones(len(x), dtype=torch.bool); keep[held] = False
        xt, yt, xv, yv = x[keep], y[keep], x[held], y[held]
    else:                                                      # `shuffle=False`: the last fifth of the sorted rows
        xt, yt, xv, yv = x[:-n_valid], y[:-n_valid], x[-n_valid:], y[-n_valid:]
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return Learner(_dls(xt, yt, xv, yv, bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the preprocessing: every image's pixels shuffled by a permutation of its own ----
def _shuffle_pixels_each(x, seed=0):
    """`np.random.seed(42)` once, then `np.random.shuffle(X[i, :])` for every row: each image's pixels permuted by a
    different permutation (the seed fixes the sequence of permutations, not one permutation for all)"""
    g = _gen(seed)
    return torch.stack([row[torch.randperm(len(row), generator=g)] for row in x])

def _shuffle_pixels_same(x, seed=0):
    "The fix: one permutation drawn once and applied to the pixels of every image"
    return x[:, torch.randperm(x.shape[1], generator=_gen(seed))]

@case("https://cs.stackexchange.com/questions/78123",
      "each image's pixels are shuffled with `np.random.shuffle(X[i, :])`, a different permutation per image: the "
      "pixel positions no longer mean anything and the classifier scores at chance",
      {'input_layout'}, epochs=5, lr=1e-3)
def pixels_shuffled_per_image(fixed):
    """'Trying to Classify MNIST where pixels are shuffled with a seed. Why is it not working?': `np.random.seed(42)`,
    then `np.random.shuffle(X[i,:])` for every row of MNIST; 'I trained on SVC and SGDClassifier of sklearn. Results
    from both are just randomness.' The answer: 'You are essentially setting each image to a (more or less) random
    image ... There is (almost) no data to learn from left ... One thing that could work if you stored a random
    permutation and applied the same permutation to each image'; the asker: 'I thought that setting a seed to
    np.random will apply the same random permutation to each image', then 'I looked it up and implemented the correct
    code ... I'm getting 94.3 cross validation accuracy'. Ported to the digits (standardised pixels), an MLP (64-64-10)
    in place of the thread's SVC, cross-entropy, Adam at 1e-3, batches of 32; the bug permutes every image's 64 pixels
    by a permutation of its own, the twin by one permutation for all (which a fully connected network does not mind).
    Only the histogram of each image's pixel values survives the bug; no layer misbehaves. Measured (seeds 0 and 1)
    over 5 epochs: the bug's batch losses end at 0.938 and 0.930 of their first, its validation loss is 2.335 and
    2.334 (ln 10 = 2.303) and its validation accuracy 0.111 and 0.083, chance for ten classes, as in the thread; the
    twin's batch losses end at 0.120 and 0.123 of their first, its validation loss 0.257 and 0.268 (accuracy 0.936
    and 0.942)."""
    x, y = digits_raw()
    x = (x - x.mean()) / x.std()
    x = _shuffle_pixels_same(x) if fixed else _shuffle_pixels_each(x)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return Learner(_dls(*_split(x, y, n_valid=360), bs=32), model, loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                   opt_func=torch_opt(torch.optim.Adam))
