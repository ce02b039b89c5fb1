"""Bug zoo: healthy runs of real fastai tasks, trained sensibly on data they can learn (vision, tabular, text, collaborative
filtering, a timm and a Hugging Face model), each long enough (50 batches or more) for the loss's course to be judged.
None may raise an alert a user is asked to act on. See `bugzoo.py`."""
import numpy as np, pandas as pd
from bugzoo import *
from fastai.losses import CrossEntropyLossFlat
from fastai.metrics import accuracy

def _digits16(n=480):
    "`n` digits as 3-channel 16×16 images (upsampled), normalised, and their labels"
    x,y = digits_raw()
    x = F.interpolate(x[:n].view(-1, 1, 8, 8) / 16., size=16, mode='bilinear').expand(-1, 3, -1, -1)
    return ((x - x.mean()) / x.std()).contiguous(), y[:n]

def _marked_tokens(n:int, seq:int, vocab:int, first:bool=False):
    "`n` sequences of tokens 4..`vocab`, of class 1 where token 3 was put in (at a random place, or `first`), and their classes"
    g = torch.Generator().manual_seed(0)
    x = torch.randint(4, vocab, (n, seq), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    x[y == 1, 0 if first else torch.randint(0, seq, (int(y.sum()),), generator=g)] = 3
    return x, y

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def vision_digits(fixed):
    "The demo's task: a small CNN on scikit-learn's digits, one-cycle at 1e-2"
    return digits_learner(bs=64)

@healthy(epochs=3, lr=3e-3, fit='fit_one_cycle')
def vision_resnet(fixed):
    "fastai's `vision_learner` with a torchvision resnet18 body (random weights) on digits upsampled to 16×16"
    from fastai.vision.all import vision_learner, resnet18
    x,y = _digits16()
    return vision_learner(tensor_dls(x, y, bs=16), resnet18, pretrained=False, n_out=10, loss_func=CrossEntropyLossFlat(), metrics=accuracy)

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def tabular(fixed):
    "fastai's `tabular_learner` on scikit-learn's breast cancer table (30 continuous features, 2 classes), normalised by `Normalize`"
    from sklearn.datasets import load_breast_cancer
    from fastai.tabular.all import TabularDataLoaders, tabular_learner, Categorify, Normalize
    d = load_breast_cancer(as_frame=True)
    df = d.frame.rename(columns=lambda c: c.replace(' ', '_'))
    conts = [c for c in df.columns if c != 'target']
    df['target'] = df['target'].map({0: 'malignant', 1: 'benign'})
    dls = TabularDataLoaders.from_df(df, cont_names=conts, y_names='target', procs=[Categorify, Normalize], bs=16,
                                     valid_idx=list(range(0, len(df), 5)))
    return tabular_learner(dls, layers=[64, 32], metrics=accuracy)

@healthy(epochs=3, lr=1e-2, fit='fit_one_cycle')
def text(fixed):
    "fastai's AWD-LSTM text classifier (small, random weights) on token sequences whose class is whether token 3 occurs"
    from fastai.text.all import AWD_LSTM, awd_lstm_clas_config, get_text_classifier
    from fastai.callback.rnn import RNNCallback
    x,y = _marked_tokens(800, 12, 40)
    model = get_text_classifier(AWD_LSTM, 40, 2, seq_len=12, config={**awd_lstm_clas_config, 'emb_sz': 32, 'n_hid': 48, 'n_layers': 2})
    return Learner(tensor_dls(x, y, bs=32), model, loss_func=CrossEntropyLossFlat(), cbs=RNNCallback(), metrics=accuracy)

@healthy(epochs=4, lr=5e-3, fit='fit_one_cycle')
def collab(fixed):
    "fastai's `collab_learner` (dot product with biases, `y_range`) on ratings made from latent factors"
    from fastai.collab import CollabDataLoaders, collab_learner
    rng = np.random.default_rng(0)
    u,i = rng.normal(size=(60, 4)),rng.normal(size=(50, 4))
    users,items = rng.integers(0, 60, 3000),rng.integers(0, 50, 3000)
    r = np.clip(2.75 + (u[users] * i[items]).sum(1) * 0.6 + rng.normal(scale=0.3, size=3000), 0.5, 5)
    df = pd.DataFrame({'user': users, 'item': items, 'rating': r.astype('float32')})
    dls = CollabDataLoaders.from_df(df, bs=64, seed=0)
    return collab_learner(dls, n_factors=8, y_range=(0, 5.5))

@healthy(epochs=3, lr=3e-3, fit='fit_one_cycle')
def timm_resnet(fixed):
    "A timm resnet (random weights) on digits upsampled to 16×16"
    import timm
    x,y = _digits16()
    return Learner(tensor_dls(x, y, bs=16), timm.create_model('resnet10t', pretrained=False, num_classes=10),
                   loss_func=CrossEntropyLossFlat(), metrics=accuracy)

class _Logits(nn.Module):
    "A Hugging Face model returning its output's `logits`, as fastai's loss wants them"
    def __init__(self, model): super().__init__(); self.model = model
    def forward(self, x): return self.model(x).logits

@healthy(epochs=4, lr=5e-3, fit='fit_one_cycle')
def hf_bert(fixed):
    "A tiny BERT (random weights, Hugging Face `transformers`) classifying token sequences by whether they start with token 3"
    from transformers import BertConfig, BertForSequenceClassification
    x,y = _marked_tokens(640, 16, 60, first=True)   # the class shows in the first token, which BERT's pooler reads
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=32, num_labels=2)
    return Learner(tensor_dls(x, y, bs=32), _Logits(BertForSequenceClassification(cfg)), loss_func=CrossEntropyLossFlat(), metrics=accuracy)
