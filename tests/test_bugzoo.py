"""The bug zoo as tests (issues 32 and 45, `bugzoo.py`): each buggy program reported in public is told its cause, each fixed
twin and each healthy run of a real fastai set-up trains and raises nothing a user is asked to act on, and the held-out
half meets its targets (`bench/diagnosis.py` prints the same figures, for every half, as a table).

What does not hold yet is listed below, one dict per reason, `{case: why}`; each entry is a strict xfail, so a fix that
makes it pass fails the suite until its entry goes."""
import json, pytest
from fastexplorer.core import validate
from bugzoo import cases, run_case, judge, trains, loss_ratio

CASES = cases()
MISSED = {    # buggy cases whose cause no alert names yet (a checklist hint names none), and why
    'reshape_not_permute': "`input_layout` (assumed): a reshape of the image axes leaves every statistic healthy",
    'pick_labels_one_sample_early': "`labels_misaligned` (assumed): labels shifted by one sample; no statistic sees it",
    'adam_eps_too_large': "no `lr_too_low` or `loss_stalled` on this run (why: not yet studied)",
    'batchnorm_on_regression_output': "the preflight's `output_activation` on a regression output made by a norm does not fire on "
                                      "this program (held-out: run once to report, not studied)",
    'pretrained_embeddings_never_trained': "an embedding left with `requires_grad=False` looks like an intended freeze",
    'pretrained_embeddings_never_loaded': "`pretrained_not_loaded` (assumed): random vectors look like any others",
    'attention_heads_view_not_transpose': "`axes_mixed` (assumed): a view mixing heads and positions; no statistic sees it",
    # bugs_fresh (issue 45's unseen set: run once to report, not studied)
    'segmentation_flip_image_only': "`labels_misaligned` (assumed): masks left unflipped for half the batch; no alert, no statistic sees it",
    'uint8_normalisation_overflow': "pixels wrapped by uint8 arithmetic lie in [0, 2) with a plausible spread: no `input_scale`, no alert",
    # bugs_fresh3 and bugs_fresh4, held-out half: measured once, at the final code of this stop, not studied
    'tagger_ignores_tag_zero': "`ignored_class` (assumed; no check raises it): no alert",
    'masked_bce_counts_pads': "`padding_in_loss` is not said of this loss and its targets: no alert",
    'split_by_row_not_by_cluster': "`valid_leak` (assumed; no check raises it): no alert",
    'masks_resized_bilinear': "`labels_misaligned` (assumed; no check raises it): no alert",
    'validation_images_augmented': "`valid_augmented` (assumed) or `eval_nondeterministic`: no alert",
    'bert_classifier_lr_too_high': "the first alert is `loss_stalled`, not `lr_too_high` or `constant_output`",
    'plateau_scheduler_wrong_mode': "no alert: no `lr_too_low`",
    # bugs_fresh5 and bugs_fresh6, held-out half: measured once, at this stop's code, not studied
    'attention_dropout_left_on_in_eval': "`eval_nondeterministic` at `afm` (the AFM's `F.dropout` runs in eval): not raised; "
                                         "the alerts are `gradient_flow` at `afm.projection` and `loss_stalled`",
    'tanh_output_under_log_loss': "the first alert is `nonfinite_loss`, which names no layer (the truth: `out_act`, a Tanh "
                                  "under a log loss)",
    'rnn_classifier_loss_climbs': "the alert is `loss_stalled`, not `lr_too_high` or `loss_diverging`",
    # bugs_fresh7, held-out half: measured once, at this stop's final code, not studied
    'sigmoid_units_under_categorical_ce': "`output_activation` (sigmoid units under Keras's categorical cross-entropy, which "
                                          "renormalises them): no alert",
    'lstm_restarts_lr_too_high': "no alert: no `lr_too_high` for a loss that climbs at each restart of SGDR",
    # bugs_fresh8 and bugs_fresh9 (issue 45's unseen set of stop 56)
    'softmax_before_cross_entropy_in_validation': "held-out, measured once: no alert (the softmax runs in evaluation only, "
                                                  "where the preflight and the training statistics do not look)",
    # stop 58's families (gh2, so2, forum3, so3, blog2, gh3, fastai2, gh4, keras2): truths written before any run
    'cyclic_lr_stepped_per_epoch': "held-out, measured once: no active alert (a `loss_stalled` resolved as the loss falls)",
    'accumulated_losses_not_divided': "held-out, measured once: no alert above info",
    'categorical_class_mode_one_sigmoid': "held-out, measured once: no active alert (`loss_stalled` resolved)",
    'labels_taken_before_shuffle': "held-out, measured once: `loss_stalled` at chance, not `labels_misaligned`",
    'frozen_batchnorm_batch_stats_in_training': "held-out, measured once: no alert (`eval_stats_stale` not raised)",
    'softmax_layer_clipped_crossentropy_stuck': "dev: `lr_too_high` is named (the loss jumps from 2.27 to 15 and stays): "
                                                "a softmax layer under Keras's clipped cross-entropy is Keras's own "
                                                "arrangement, which no check calls wrong; at 0.05 the same program trains",
    'pretraining_frames_unscaled': "dev: the raw frames' run learns (validation accuracy 0.856 against 0.253 at "
                                   "chance), so the preflight's `input_scale` settles as info",
    # bugs_fresh11 (dev half)
    'augmentation_erases_the_label': "dev: `augmentation_too_strong` (assumed; no check raises it): the first alert is "
                                     "`dead` at `3`, then `loss_stalled`",
    # bugs_fresh10 and bugs_fresh11, held-out half: measured once, at this stop's final code, not studied
    'validation_first_samples_one_class': "the alert is `valid_at_chance` (the symptom), not `labels_one_class` "
                                          "(measured again at stop 57, not studied)",
    # bugs_fresh_gh, _so, _forum, _forum2 (stop 57): measured once at their merge, truths written before any run
    'transfer_learning_batchnorm_frozen': "held-out, measured once: no alert (BatchNorm weights frozen by "
                                          "`train_bn=False` look like an intended freeze)",
    # bugs_fresh_gh6 and _so6 (stop 60): measured once at their merge, truths written before any run
    'softmax_loss_head_not_optimised': "held-out, measured once: no alert (the classifier lives in the loss, outside the "
                                       "model, where no statistic looks)",
    'loss_normalised_twice_last_batch_spikes': "held-out, measured once: no alert (`loss_summed` or `last_batch_one`)",
    # bugs_fresh_gh8, _hf8 and _ds8 (stop 62): measured once at their merge, truths written before any run
    'vae_mean_reconstruction_summed_kl': "held-out, measured once: no alert (a posterior collapsed by the loss's weights, "
                                         "while the loss falls)",
    'causal_lm_labels_shifted_twice': "held-out, measured once: no alert (targets two tokens ahead; the loss falls)",
    'warmup_schedule_stepped_per_epoch': "held-out, measured once: no alert (`lr_too_low` or `loss_stalled`)",
    'test_set_scaled_by_its_own_range': "held-out, measured once: the alert is `valid_at_chance` (the symptom), not "
                                        "`valid_input_shift`",
    # bugs_fresh_fa9, _so9 and _pf9 (stop 62)
    'normalised_only_when_reloaded': "dev: no alert; the validation inputs, normalised where training's are in 0..1, "
                                     "fill the histograms' edge bins as the raw zeros do (0.39 of the mass apart)",
    'multiclass_softmax_under_binary_crossentropy': "held-out, measured once: no alert (`loss_for_classes`)",
    # bugs_fresh_gh9 to _gh12 (stop 63): truths written before any run; the held-out cases measured at their merge
    'train_metrics_ground_truth_unshuffled': "dev: no alert; only the loop's own training metric is wrong, scored "
                                             "against unshuffled labels, and training is sound: no statistic sees it",
    'report_scores_stale_preds': "dev: no alert; the epoch's report scores a stale global, and training is sound: no "
                                 "statistic sees it",
    'peft_adapter_loaded_not_trainable': "held-out: the preflight's error says no parameter can be trained, as "
                                         "`gradient_flow`, not `frozen`",
    'attention_mask_inverted_to_padding': "held-out, measured once: the first alert is `gradient_flow` at `attn.v`, "
                                          "not `constant_output` or `ignores_input` at `attn`",
    'sft_loss_mask_dropped': "held-out, measured once: no alert (`padding_in_loss` on prompt tokens)",
    'midtraining_lr_ramps_up': "held-out, measured once: no alert (a rate ramped up from 0; the run still learns)",
    'rotary_embedding_arguments_swapped': "held-out, measured once: no alert (the saturated softmax is inside "
                                          "`scaled_dot_product_attention`, no module's output)",
    'tabular_target_among_inputs': "held-out, measured once: no alert (the target among the inputs; no statistic sees it)",
    'moco_memory_bank_not_normalised': "held-out, measured once: the first alert is `loss_stalled`, not "
                                       "`constant_output` or `loss_at_init` (the bank is a tensor inside the loss)",
    'sft_pad_is_eos_masks_eos': "`ignored_class` (assumed): the EOS never reaches the loss as a target, yet the loss "
                                "falls and every statistic is healthy",
    'byol_adam_at_lars_lr': "`dead` is said (62 to 77% of `predictor.2`), as info: the loss falls, as a collapsing "
                            "self-supervised loss does; an update ratio of 0.21 in epoch 1 is within what fixed twins "
                            "show (up to 2.1), so no `lr_too_high` from it",
    'ema_without_batchnorm_buffers': "held-out, measured once: the first alert is `frozen` at `ema.module.0`, not "
                                     "`eval_stats_stale`",
    'time_split_trains_on_later_sales': "held-out, measured once: no alert (later sales in training; no statistic sees it)",
    # bugs_fresh_pf10 and _so10 (stop 65): truths written before any run; the held-out cases measured at their merge
    'kl_div_on_softmax_probabilities': "held-out, measured once: no alert (`KLDivLoss` given probabilities, not "
                                       "log-probabilities: the loss is negative, and falls)",
    'pixels_shuffled_per_image': "held-out, measured once: no alert (each image's pixels permuted apart; the model "
                                 "sees noise, and no layer misbehaves)",
    # bugs_fresh_gh19 (stop 65): truths written before any run; the held-out cases measured at their merge
    'disc_optimizer_lists_mrd_twice': "held-out, measured once: `optimizer_groups` is first, but at `mpd.net.0`, a "
                                      "module inside the truth's `mpd`, which the judge does not take for it",
    'optimizer_main_copies_before_checkpoint': "held-out, measured once: `lr_too_high` (the loss jumps when the "
                                               "random main copies are stepped back in), not `pretrained_not_loaded`",
    'one_cycle_max_lr_overrides_encoder_group': "held-out, measured once: no alert (both groups at one rate; the run "
                                                "learns, a little worse)",
}
ALARMS = {    # fixed twins and healthy runs that raise a warning or an error, and why: false alarms, counted by the bench
    'linear_regression_sgd_rate_diverges': "held-out, measured once: the twin (the rate lowered to 1e-4, x from 1 to 20 "
                                           "kept) raises `input_scale` and `valid_input_shift`",
    'lora_trained_in_float16': "held-out, measured once: the bfloat16 twin raises `frozen` at `net.0.lora_A`",
    'batchnorm_moving_averages_not_caught_up': "held-out, measured once: true of the twin, which validates on its 30 "
                                               "training images (`valid_leak`), as the thread did",
    'mlp_without_nonlinearity': "the fix keeps the report's N(0, 1) initialisation and Adam at 0.1: its loss at initialisation is "
                                "far above chance (`loss_at_init`, true)",
    'output_relu_dead_from_bias_init': "true of the twin in its budget: its loss falls from 0.36 (above chance at the start) "
                                       "to 0.25 and its validation loss is 0.247, both above the chance level "
                                       "0.23 (the MSE of predicting the mean): it has learnt the mean, not yet the inputs. The "
                                       "stall is judged again at each epoch's end; run for 8 epochs, it is resolved at epoch 4",
    'ccs_regressor_relu_output': "likely true of the twin in its budget: from an output bias of -2 its loss falls from 9.3 to 0.062, "
                                 "the chance level 0.063 (the targets' variance): it has learnt the mean, not yet the peptides; "
                                 "`loss_stalled` at step 199 (one at step 99 resolved)",
    # bugs_fresh4 (dev half, run once to report)
    'quartic_regression_unscaled': "true of the twin in its budget: with x and y scaled its loss falls from 0.65 to 0.072, the chance "
                                   "level 0.074 (the variance of x**4 for x in [-1, 1]): it has learnt the mean, not yet the quartic; "
                                   "`loss_stalled` at the end of each of its 5 epochs",
    'linear_stack_unscaled_target': "measured once (bugs_fresh4, held-out, not studied): the twin keeps the report's Linear "
                                    "layers with no activation between them, which `linear_stack` names in both runs",
    # bugs_fresh5 and bugs_fresh6, held-out half: measured once, at this stop's code, not studied
    'property_targets_unscaled': "measured once: the twin raises `target_scale` too",
    'attention_dropout_left_on_in_eval': "measured once: the twin raises `gradient_flow` at `afm.projection` and `loss_stalled` "
                                         "(its loss falls only from 1.15 to 0.99)",
    # bugs_fresh8 and bugs_fresh9
    'arcface_sqrt_at_domain_edge': "measured once (held-out, not studied): the twin raises `loss_at_init` at `margin` "
                                   "and `loss_stalled` twice",
    'ema_without_batchnorm_buffers': "held-out, measured once: the twin raises `frozen` at `ema.module.0`",
    'bert_warmup_linear_past_t_total': "dev, true of the twin: the merged fix holds BertAdam's rate at 0 past "
                                       "`t_total`, so no weight moves in the last 272 of its 512 steps (`frozen`)",
}
UNSTEADY = {  # runs whose outcome differs with the threads or CPU: a non-strict xfail, which the bench reports
    'binary_cnn_collapses_to_half': "held-out, measured once: at one thread `lr_too_high` is named first; at two (CI's "
                                    "`.ci/run`) the SGD-at-1.0 run that collapses raised nothing",
    'float16_adam_default_epsilon': "held-out: the twin (eps raised, the weights still float16) was quiet where it was "
                                    "first measured; on an Intel Xeon at one and two threads it raises `frozen` at "
                                    "`head.bias` (51% of its elements never move: steps below half a float16 spacing "
                                    "round away), true of a twin that keeps `model.half()` under Adam",
}
IDLE = {      # fixed twins that do not train in their budget (last losses above 0.9× the first): the bench does not count them
}
RESULTS,TWINS = {},{}  # name: the judgement of its buggy run; name: its fixed twin (or healthy run) quiet? (`None`: it did not train)

def _xfail(n, *reasons):
    "Case `n` as a pytest parameter, a strict xfail where one of the `reasons` dicts lists it (`UNSTEADY`: not strict)"
    if n in UNSTEADY: return pytest.param(n, marks=pytest.mark.xfail(strict=False, reason=UNSTEADY[n]))
    why = [r[n] for r in reasons if n in r]
    return pytest.param(n, marks=pytest.mark.xfail(strict=True, reason='; '.join(why))) if why else n

@pytest.mark.parametrize('name', [_xfail(n, MISSED) for n,c in CASES.items() if not c.healthy])
def test_the_buggy_program_is_told_its_cause(name, tmp_path):
    c = CASES[name]
    al,_ = run_case(c, False, tmp_path/'run')
    RESULTS[name] = j = judge(c, al)
    for f in (tmp_path/'run').glob('*.json'): validate(json.loads(f.read_text()))   # every alert kind fits the schemas
    assert j['detected'], f"{c.bug}: want {sorted(c.kinds)} {c.layer or ''}, got {list(zip(al.kind, al.layer, al.hint))}"

@pytest.mark.parametrize('name', [_xfail(n, ALARMS, IDLE) for n in CASES])
def test_the_fixed_twin_or_healthy_run_trains_and_raises_nothing(name, tmp_path):
    c = CASES[name]
    al,run = run_case(c, True, tmp_path/'run')
    TWINS[name] = al.empty if trains(run.losses) else None   # a twin that does not train is not counted
    if c.healthy: assert len(run.losses) >= 50, f"{len(run.losses)} training batches: too few for the loss's course to be judged"
    assert trains(run.losses), f"it does not learn: its last losses are {loss_ratio(run.losses):.2f} of its first"
    assert list(zip(al.kind, al.layer, al.message)) == []   # a slow start's stall, if raised, is resolved: not active

@pytest.mark.xfail(strict=True, reason="not met yet (issue 45 open): on the held-out half, alerts name the cause of 113 of 162 "
                                       "bugs, the first alert names it in 101, and 9 of 162 fixed twins alert "
                                       "(10 where `float16_adam_default_epsilon`'s unsteady twin does; "
                                       "bench/diagnosis.py, one thread, seed 0)")
def test_the_zoo_meets_its_targets():
    """At least 24 reported bugs and 30 healthy set-ups; on the held-out half, alerts name the cause of 90% of the bugs, the
    first alert names it in 80%, and at most 1 fixed twin in 16 raises a warning"""
    buggy = [n for n,c in CASES.items() if not c.healthy]
    assert len(buggy) >= 24 and all(CASES[n].source.startswith('http') for n in buggy)
    assert sum(c.healthy for c in CASES.values()) >= 30
    held = [n for n in buggy if CASES[n].half == 'held-out']
    if not set(held) <= set(RESULTS) or not set(held) <= set(TWINS): pytest.skip('run with every held-out case and its twin')
    res = {n: RESULTS[n] for n in held}
    assert sum(r['detected'] for r in res.values()) >= 0.9 * len(held), res
    assert sum(r['first'] for r in res.values()) >= 0.8 * len(held), res
    counted = [n for n in held if TWINS[n] is not None]
    assert sum(not TWINS[n] for n in counted) <= len(counted) / 16, {n: TWINS[n] for n in held}
