"""Bug zoo, a family from the Hugging Face forum and from GitHub threads of `huggingface/transformers` (issue 45): bugs
of fine-tuning or training a transformer where the loss does not fall, falls for the wrong reason or turns NaN. See
`bugzoo.py`. Each case cites its thread; its truth (`kinds`, `layer`) was written and committed before the case was ever
run under the tool. Cases were chosen for how common the bug is (causal-LM labels shifted by hand and shifted again by
the model, the Trainer's label smoother scoring unshifted causal-LM labels, a per-step warm-up schedule stepped once an
epoch, a T5 whose feed-forward activations overflow float16 under mixed precision, LoRA adapters left without gradients
by reentrant gradient checkpointing), never for whether the tool catches it. Every port uses a small random-weight
Hugging Face model (GPT-2, BERT, T5 configs; no pretrained weights) on synthetic tokens. Two cases leave every layer
healthy and the loss falling: the model learns, only what it learns is not the next token; their docstrings say so."""
from fastai.callback.core import Callback
from fastai.metrics import accuracy
from bugzoo import *
from bugs_optim import _markov_text
from bugs_fresh_gh3 import _TinyGPT2, _LoRALinear
from healthy_more import HFLogits, mixed


# ---- the labels of a causal language model ----
_VOCAB, _LEN = 100, 20

def _chunks(shift_by_hand=False):
    """The Markov stream of `bugs_optim` (each token followed by one of 3 successors, weights 6:3:1) cut into sequences
    of 20 tokens, and their labels: the ids themselves (as the Hugging Face examples pass them), or, if `shift_by_hand`,
    the ids moved one place left with -100 at the end"""
    s = _markov_text(n_tokens=24000, vocab=_VOCAB)
    ids = s[:len(s) // _LEN * _LEN].view(-1, _LEN)
    if not shift_by_hand: return ids, ids.clone()
    return ids, torch.cat([ids[:, 1:], torch.full((len(ids), 1), -100)], 1)

def _hf_causal_loss(logits, labels):
    "The loss a Hugging Face causal LM computes from `labels`: transformers' `ForCausalLMLoss`, which shifts them once"
    from transformers.loss.loss_utils import ForCausalLMLoss
    return ForCausalLMLoss(logits, labels, vocab_size=logits.shape[-1])

def _next_token_loss(shifted_by_hand):
    "The metric: cross-entropy of the logits at `t` against the true token `t + 1`, however the labels were stored"
    def next_token_loss(logits, labels):
        t = labels if shifted_by_hand else torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], 1)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), t[:, :-1].reshape(-1), ignore_index=-100)
    return next_token_loss

@case("https://discuss.huggingface.co/t/where-does-the-transformers-do-the-target-text-shifting-in-causal-lm/32408",
      "the dataset shifts the causal-LM labels one token left by hand and the model shifts them again: every position is trained to predict the token after next",
      {'labels_misaligned'}, epochs=6, lr=1e-3)
def causal_lm_labels_shifted_twice(fixed):
    """'Where does the Transformers do the target text shifting in causal LM?': a reply there, 'in the custom DataSet
    class I wrote, in the get_item() I shifted the label manually by myself, and after fine-tuning with 50000 samples on
    a German GPT2, the loss value cannot go down at all. Then I realized, I might need to follow the way in other
    tutorials, which means, just copying the input_ids without shifting as the labels'; the maintainer's answer in the
    thread points to the model's own code, which shifts the labels inside `forward`. A GPT-2 with random weights (2
    layers, width 64) on sequences of 20 tokens from a Markov chain whose next token is one of 3 successors (so the next
    token is learnable, the one after it much less), scored by transformers' own `ForCausalLMLoss`, Adam at 1e-3; the
    bug's labels are the ids shifted left by hand (-100 at the end), the twin's the ids themselves. Every layer is
    healthy and the loss falls: the model learns a task, the wrong one. Measured over 6 epochs: the epochs' training
    loss falls from 3.96 to 2.33 (validation 3.56 to 2.18; the batch losses end at 0.52 of their first) while the
    validation loss on the true next token rises from 4.48 to 5.76, worse than a uniform guess (ln 100 = 4.61); the
    twin's falls from 3.65 to 1.38 (validation and next-token loss 3.07 to 1.15; its batch losses end at 0.29 of their
    first)"""
    ids, labels = _chunks(shift_by_hand=not fixed)
    return Learner(tensor_dls(ids, labels, bs=32), _TinyGPT2(vocab=_VOCAB, length=_LEN), loss_func=_hf_causal_loss,
                   metrics=_next_token_loss(not fixed), opt_func=torch_opt(torch.optim.Adam))

def _label_smoother(shift):
    "The Trainer's loss when `label_smoothing_factor=0.1`: transformers' `LabelSmoother`, with `shift_labels` as given"
    from transformers.trainer_pt_utils import LabelSmoother
    ls = LabelSmoother(epsilon=0.1)
    def smoothed_loss(logits, labels): return ls({'logits': logits}, labels, shift_labels=shift)
    return smoothed_loss

@case("https://github.com/huggingface/transformers/pull/17987",
      "with label smoothing on, the Trainer scores a causal LM's logits against its labels without shifting them: each position is trained to output its own input token",
      {'labels_misaligned', 'future_leak'}, epochs=6, lr=1e-3)
def label_smoother_unshifted_causal_labels(fixed):
    """'Shifting labels for causal LM when using label smoother' (fixes issue 17960, merged): 'When training CausalLM
    such as GPT2, loss is computed within model's `foward()` function and `labels` are shifted internally. However, if
    label smoothing is applied, loss is computed in trainer's `compute_loss` function and `labels` are not shifted. This
    causes misalignment of `labels` and corresponding `input_ids`'; the fix passes `shift_labels=True` to the label
    smoother for causal LMs. The logit at position `t` is scored against the token at `t`, which the model reads at its
    input: it learns to copy. The same random-weight GPT-2 and Markov sequences as `causal_lm_labels_shifted_twice`,
    labels equal to the ids, transformers' own `LabelSmoother(epsilon=0.1)`, Adam at 1e-3; the twin shifts. Every layer
    is healthy and the loss falls fast. Measured over 6 epochs: the epochs' training loss falls from 2.85 to 0.90
    (validation 2.16 to 0.80, the floor the smoothing term leaves once the copy is perfect; the batch losses end at 0.25
    of their first) while the validation loss on the true next token rises from 4.73 to 6.74, worse than a uniform guess
    (ln 100 = 4.61); the twin's smoothed loss falls from 3.76 to 1.87 (validation 3.24 to 1.72; 0.43 of its first) and
    its next-token loss from 3.08 to 1.20"""
    ids, labels = _chunks()
    return Learner(tensor_dls(ids, labels, bs=32), _TinyGPT2(vocab=_VOCAB, length=_LEN),
                   loss_func=_label_smoother(fixed), metrics=_next_token_loss(False),
                   opt_func=torch_opt(torch.optim.Adam))


# ---- the learning-rate schedule ----
def _first_token_classes(n=640, length=16, vocab=60, seed=0):
    "Token sequences and a 0/1 class that shows in the first token (3 for class 1), which BERT's pooler reads"
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randint(4, vocab, (n, length), generator=g), torch.randint(0, 2, (n,), generator=g)
    x[y == 1, 0] = 3
    return x, y

class _HFWarmupSchedule(Callback):
    """transformers' `get_polynomial_decay_schedule_with_warmup` over the run's optimiser steps (warm-up of `warmup`
    steps, decay to the last step), stepped after each batch (`per_step`) or, as Lightning does by default, after each
    epoch"""
    order = 60
    def __init__(self, warmup, per_step): self.warmup, self.per_step = warmup, per_step
    def before_fit(self):
        from transformers import get_polynomial_decay_schedule_with_warmup
        total = self.n_epoch * len(self.dls.train)
        self.sched = get_polynomial_decay_schedule_with_warmup(self.opt.opt, self.warmup, total)
    def after_batch(self):
        if self.training and self.per_step: self.sched.step()
    def after_epoch(self):
        if not self.per_step: self.sched.step()

@case("https://github.com/huggingface/transformers/issues/20916",
      "a warm-up schedule counted in optimiser steps is stepped once an epoch: the learning rate is 0 for the whole first epoch and far below its peak after",
      {'lr_too_low', 'loss_stalled'}, epochs=6, lr=5e-4)
def warmup_schedule_stepped_per_epoch(fixed):
    """'Learning rate is set to zero for the entirety of the first epoch': using
    `get_polynomial_decay_schedule_with_warmup` in a PyTorch Lightning module, 'this will produce a `LambdaLR` that will
    return a multiplicative factor of 0 for the entirety of the first epoch ... which will mean that the entire first
    epoch the model will not train' (also asked on the forum, discuss.huggingface.co/t/28195); the reporter found the
    cause: 'Huggingface's trainer calls the lr scheduler every step', while Lightning steps it once an epoch unless the
    scheduler is registered with `interval: step`. A BERT with random weights (2 layers, width 32) classifying token
    sequences by their first token, cross-entropy, AdamW at 5e-4, the schedule's warm-up 10 steps (a tenth of the 96
    steps of the run); the bug steps the schedule after each epoch, the twin after each batch. Measured: the bug's rate
    is 0 through the first epoch and 5e-5, 1e-4, ... 2.5e-4 in the next five; its training loss stays at 0.70 for three
    epochs (validation accuracy 0.43 to 0.46), and falls only as the rate climbs, to 0.64 in the sixth (validation
    loss 0.46, accuracy 1.0; its batch losses end at 0.75 of their first); the twin's falls to 0.35 by the sixth epoch
    (validation 0.21, accuracy 1.0 from the second; 0.30 of its first)"""
    x, y = _first_token_classes()
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=32, num_labels=2)
    return Learner(tensor_dls(x, y, bs=32), BertForSequenceClassification(cfg), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.AdamW),
                   cbs=[HFLogits(), _HFWarmupSchedule(warmup=10, per_step=fixed)])


# ---- precision: float16 overflow ----
class _T5Classifier(nn.Module):
    """A T5 encoder with random weights (2 blocks, width 32, ReLU feed-forward of 128) and a linear head on the first
    position. The feed-forward weights are scaled up `ff_scale` times, so that, as in a pretrained T5, its outputs reach
    the tens of thousands"""
    def __init__(self, ff_scale=160.):
        super().__init__()
        from transformers import T5Config, T5EncoderModel
        cfg = T5Config(vocab_size=60, d_model=32, d_kv=16, d_ff=128, num_layers=2, num_heads=2, dropout_rate=0.,
                       feed_forward_proj='relu')
        self.t5, self.head = T5EncoderModel(cfg), nn.Linear(32, 2)
        with torch.no_grad():
            for blk in self.t5.encoder.block:
                ff = blk.layer[1].DenseReluDense
                ff.wi.weight.mul_(ff_scale); ff.wo.weight.mul_(ff_scale)
    def forward(self, x): return self.head(self.t5(input_ids=x).last_hidden_state[:, 0])

@case("https://github.com/huggingface/transformers/issues/5651",
      "T5 is fine-tuned in float16 mixed precision: the feed-forward output `wo` exceeds float16's largest value (65504), turns to inf and the loss to NaN",
      {'nonfinite', 'nonfinite_loss'}, layer='t5.encoder.block.0.layer.1.DenseReluDense.wo', epochs=4, lr=1e-3)
def t5_fp16_feedforward_overflow(fixed):
    """'T5 fp16 overflow in forward (T5DenseReluDense)': 'after 34 iterations I get nan loss from the forward method.
    After debugging it, I found that the source of the nan is due to an overflow that happens in `T5DenseReluDense`,
    when running `h = self.wo(h)` ... caused due to a value of 66246.3906, which is over the maximum value of 65504 in
    fp16. This issue only happens with fp16 (opt_level="O1"), with opt_level="O0" everything is fine'; transformers
    later clamped T5's hidden states in float16 (PR 9487), and T5's authors answer elsewhere that they train in
    bfloat16. A T5 encoder with random weights whose feed-forward weights are scaled up so that its `wo` outputs start
    near 6e4 (a pretrained T5's sit in that range), a linear head, token sequences classified by their first token,
    cross-entropy, AdamW at 1e-3, under fastai's mixed precision in float16 (autocast and a gradient scaler, on the CPU
    as `healthy_more.mixed` does); the twin trains in float32 (the issue's O0). Measured: in float32 the first block's
    `wo` output is 6.2e4 at the start and reaches 7.8e4 in training; in float16 it is inf from the first batch, every
    training and validation loss of the 4 epochs is NaN and the accuracy stays at chance (0.47); the twin's loss falls
    from 0.67 to 0.32 by the fourth epoch (validation 0.19, accuracy 0.93; its batch losses end at 0.20 of their first)
    """
    x, y = _first_token_classes()
    learn = Learner(tensor_dls(x, y, bs=32), _T5Classifier(), loss_func=nn.CrossEntropyLoss(), metrics=accuracy,
                    opt_func=torch_opt(torch.optim.AdamW))
    return learn if fixed else mixed(learn, 'fp16')


# ---- the weights: LoRA adapters under gradient checkpointing ----
def _token_anywhere(n=640, length=16, vocab=60, seed=0):
    "Token sequences opening with token 2, of class 1 if token 3 occurs anywhere after it (class 0 never holds it)"
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randint(4, vocab, (n, length), generator=g), torch.randint(0, 2, (n,), generator=g)
    x[:, 0] = 2
    pos = torch.randint(1, length, (n,), generator=g)
    x[y == 1, pos[y == 1]] = 3
    return x, y

def _lora_bert(reentrant):
    """A BERT classifier with random weights (2 layers, width 32), frozen but for LoRA adapters (r=8, alpha=16) on every
    attention's query and value and the classification head (PEFT's `modules_to_save` for sequence classification), run
    under gradient checkpointing with `use_reentrant` as given. Current transformers makes the embeddings' output
    require grad itself (`enable_input_require_grads`, its fix for this); it is undone here, as in the versions of the
    thread"""
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(cfg)
    model.requires_grad_(False)
    model.classifier.requires_grad_(True)
    for layer in model.bert.encoder.layer:
        att = layer.attention.self
        att.query, att.value = _LoRALinear(att.query), _LoRALinear(att.value)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': reentrant})
    model.disable_input_require_grads()
    return model

@case("https://github.com/huggingface/transformers/issues/26221",
      "LoRA adapters sit in layers run under reentrant gradient checkpointing behind frozen embeddings: no input of a checkpointed layer requires grad, so the adapters get no gradient and only the head trains",
      {'frozen', 'gradient_flow'}, epochs=6, lr=5e-3)
def lora_under_reentrant_checkpointing(fixed):
    """'Gradient checkpointing should have no functional impact' (labelled solved): a LoRA fine-tune gave other results
    with gradient checkpointing on; the maintainer: 'At least one input and output must have requires_grad=True for the
    reentrant variant. If this condition is unmet, the checkpointed part of the model will not have gradients', and the
    Trainer had reset the user's setting, 'the default value of `use_reentrant=True` was used'; the fix passes
    `gradient_checkpointing_kwargs={"use_reentrant": False}`. (A Hugging Face blog's LoRA notebook had the same cause:
    'only classifier head is trained', huggingface/blog issue 1824.) Here PyTorch only warns 'None of the inputs have
    requires_grad=True. Gradients will be None'; nothing fails. The random-weight BERT of `_lora_bert`, token sequences
    classified by whether token 3 occurs after the first position (the frozen random encoder alone does not expose it to
    the head), cross-entropy, AdamW at 5e-3; the bug checkpoints with `use_reentrant=True`, the twin with
    `use_reentrant=False`. Measured over 6 epochs: every adapter's `lora_B` stays exactly 0 and the loss stays at 0.69
    (ln 2; its batch losses end at 1.00 of their first, validation accuracy 0.48 to 0.52); the twin's adapters move
    (`lora_B` up to 0.57) and its loss falls after the third epoch to 0.52 (validation 0.16, accuracy 0.98; 0.36 of its
    first)"""
    x, y = _token_anywhere()
    return Learner(tensor_dls(x, y, bs=32), _lora_bert(reentrant=not fixed), loss_func=nn.CrossEntropyLoss(),
                   metrics=accuracy, opt_func=torch_opt(torch.optim.AdamW), cbs=[HFLogits()])
