"""MPNet's gap, checked against Hugging Face: transformers' MPNetForMaskedLM (PyTorch, float32)
trained on exactly the batches and steps of a finished quickstart's MPNet-architecture MLM run
(stage pretrain-mpnet-mlm: run_pretrain.py --objective=mpnet --mpnet_mode=mlm), from the same
initial weights, with the same loss and the same optimizer, set against our own replay of that
run. The quickstart's directory is only read.

  python tools/mpnet_hf_curve.py --output_dir=output/quickstart \\
      --out=/tmp/mpnet_hf_curve.json                      # every arm, --steps=train_steps
  python tools/mpnet_hf_curve.py --output_dir=output/quickstart \\
      --out=/tmp/exact.json --steps=0 --exact_steps=200 --no-null_arm --no-hf_init_arm

The arms, each a list of per-step training losses on the same per-step batches:
  replay        our model, stepped by the trainer's own step (training/stepper.py) from a task
                built from the stage's recorded command exactly as pretraining/runner.py builds
                it, seeded as training/trainer.py seeds it (the run's step-0 weights are not
                saved: they are rebuilt from --seed), fed the run's records in order, each
                step's 80/10/10 draw from task.step_seed(step) (pretraining/task.py). Its mean
                over each logged loop (the log prints the MEAN loss of the 50 steps of a host
                loop, training/trainer.py) is compared with the log, and its weights with the
                run's checkpoints: equal to float rounding = the same batches, the same draws,
                the same dropout masks.
  hf            MPNetForMaskedLM from the replay's step-0 weights (modeling/mpnet hf names),
                on the inputs the run's step built (captured from task.predict compiled with
                XLA as the step is: CapturedInputs): the corrupted tokens put back in position
                order, position ids pad_token_id + 1 + position passed explicitly (HF would
                count from its hard-coded padding_idx 1), the word embedding's row 1 left
                trainable (HF freezes it as padding_idx; it is our <s>), the cross entropy of
                the c predicted positions averaged over batch x c (ours: modeling/losses.lm_loss
                without a mask), tf.train.AdamOptimizer (TF1 bias correction, float32) after
                tf.clip_by_global_norm with the release's linear warmup + decay, written out in
                torch below; dropout from the config (torch's masks, not ours).
  exact         ours and hf with dropout 0 for --exact_steps steps: per-step differences.
  null          (--null_arm) ours again with other dropout masks: how far two runs that differ
                only in their dropout masks drift apart, the yardstick for replay - hf.
  hf_init       (--hf_init_arm) ours and hf from Hugging Face's own initialisation
                (MPNetForMaskedLM(config), torch.manual_seed(--seed)): what the run would give
                with independently drawn weights.
The replay equals the log only when this checkout computes what the run's did (the JSON
records git HEAD): rerun the stage after a change to MPNet's pretraining, or run the tool from
the run's commit. On the small preset (2000 steps, shared 2-core CPU) every arm takes ~22 min.
Held-out: every final model's masked-token loss on the first --heldout_batches batches of the
valid records, the draws of reproduction/diagnostics.py's held-out loss (seed of batch i: i).

--out gets one JSON object (written atomically): the flags, the logged curve, every arm's
per-step losses, gradient norms and curve at the logged steps, the comparisons (max / mean
absolute differences; over the last 500 steps the mean paired difference with its standard
error, naive and from 50-step blocks), the checkpoint and learning-rate checks, the held-out
losses, the groups of step-0 weights that are bit-identical, and the seconds per arm.
"""

import argparse
import json
import os
import re
import sys
import time

import numpy as np

# Run by path (python tools/mpnet_hf_curve.py): the repository root on sys.path for its two
# halves in tools/ (the installed project does not include tools/).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from data_utils import fileio  # noqa: E402
from tools.mpnet_hf_side import (check_optimizer, heldout_hf, hf_batches, hf_loss, hf_model,
                                 hf_state, lr_schedule, our_weights, train_hf)
from tools.mpnet_replay import (build_task, code_version, compare, heldout_ours,
                                identical_groups, logged_curve, parse_run_flags, read_stage,
                                strip, train_batches, train_ours, valid_batches)

STAGE = "pretrain-mpnet-mlm"


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n\n")[0].replace("\n", " "),
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
  parser.add_argument("--output_dir", required=True,
                      help="The finished quickstart's directory (read only): its "
                      f"stages/{STAGE}.json command, logs/{STAGE}.log, records, config and "
                      "checkpoints.")
  parser.add_argument("--out", required=True,
                      help="JSON file to write (atomically) with every number measured.")
  parser.add_argument("--stage", default=STAGE,
                      help="The stage whose run is replayed (an --objective=mpnet "
                      "--mpnet_mode=mlm run).")
  parser.add_argument("--steps", type=int, default=None,
                      help="Steps of the replay, hf, null and hf_init arms (default: the run's "
                      "--train_steps; 0: none of them). The learning-rate schedule is always "
                      "the run's.")
  parser.add_argument("--exact_steps", type=int, default=50,
                      help="Steps of the dropout-0 comparison of ours and hf (0: skip).")
  parser.add_argument("--null_arm", action=argparse.BooleanOptionalAction, default=True,
                      help="Also run ours with other dropout masks (the yardstick of dropout "
                      "noise for replay - hf).")
  parser.add_argument("--hf_init_arm", action=argparse.BooleanOptionalAction, default=True,
                      help="Also run ours and hf from Hugging Face's own initialisation.")
  parser.add_argument("--heldout_batches", type=int, default=40,
                      help="Valid batches of the held-out loss of every final model "
                      "(reproduction/diagnostics.py: 40; 0: skip).")
  parser.add_argument("--full_logits", action="store_true",
                      help="hf: HF's own forward with labels (logits of every position) "
                      "instead of the LM head on the predicted positions only (same loss, "
                      "slower).")
  parser.add_argument("--threads", type=int, default=1,
                      help="torch's intra-op threads (1 runs fastest on a shared 2-core CPU).")
  parser.add_argument("--seed", type=int, default=0,
                      help="torch's seed (hf dropout masks, the hf_init arm's weights).")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
  t_start = time.time()
  log = lambda message: print(f"[{time.time() - t_start:7.1f}s] {message}", flush=True)

  import torch
  from absl import logging as absl_logging
  absl_logging.set_verbosity(absl_logging.WARNING)
  torch.set_num_threads(args.threads)

  run_args, record = read_stage(args.output_dir, args.stage)
  f = parse_run_flags(run_args)
  if f.objective != "mpnet" or f.mpnet_mode != "mlm":
    sys.exit(f"{args.stage}: --objective={f.objective} --mpnet_mode={f.mpnet_mode}; this tool "
             "compares the mlm mode of --objective=mpnet")
  task = build_task(f)
  settings = task.optimizer_settings()
  check_optimizer(settings)
  steps = f.train_steps if args.steps is None else args.steps
  lr_at = lr_schedule(settings)
  logged = logged_curve(fileio.join(args.output_dir, "logs", f"{args.stage}.log"))
  ends = [s for s, _ in logged]
  model_dir = f.model_dir
  ckpts = {}
  ckpt_dir = fileio.join(model_dir, "ckpt")
  if fileio.isdir(ckpt_dir):
    for name in fileio.listdir(ckpt_dir):
      match = re.fullmatch(r"ckpt-(\d+)\.index", name.rstrip("/"))
      if match:
        ckpts[int(match.group(1))] = fileio.join(ckpt_dir, f"ckpt-{match.group(1)}")
  saved = {}
  recorded = fileio.join(model_dir, "optimizer.json")
  if fileio.exists(recorded):
    saved = {k: v for k, v in json.loads(fileio.read_text(recorded)).items()
             if k != "description"}
  result = {"output_dir": args.output_dir if fileio.is_url(args.output_dir)
            else os.path.abspath(args.output_dir), "stage": args.stage,
            "code": code_version(),
            "command": record["command"], "flags": vars(args), "steps": steps,
            "optimizer": settings,
            "optimizer_matches_run": (not saved) or all(settings.get(k) == v
                                                         for k, v in saved.items()),
            "logged": logged, "logged_loss_is": "the mean over each host loop's steps "
            "(training/trainer.py: --steps_per_loop steps; the log's step is the loop's end)",
            "arms": {}, "comparisons": {}, "heldout": {}, "seconds": {}}
  log(f"{args.stage}: {len(logged)} logged losses, checkpoints {sorted(ckpts)}, "
      f"optimizer {settings['optimizer']} lr {settings['learning_rate']} warmup "
      f"{settings['warmup_steps']} / {settings['train_steps']}")

  def save():
    fileio.write_atomic(args.out, json.dumps(result, indent=1) + "\n")

  # The run's step-0 weights, rebuilt as the trainer builds them (seed --seed).
  from training.stepper import Stepper
  initial = Stepper(task).weights()
  result["initial_identical"] = identical_groups(initial)
  log(f"step-0 weights: {len(result['initial_identical']['groups'])} groups of bit-identical "
      f"tensors; position embeddings = word embedding rows: "
      f"{result['initial_identical']['position_embeddings_equal_word_rows']}")
  template = task.build_model()
  template.ensure_built()
  state0 = hf_state(template, initial)

  # The batches in HF's layout, built once: the inputs the run's step built at each step.
  count = max(steps, args.exact_steps)
  t = time.time()
  train_hf_batches = hf_batches(task, template, enumerate(train_batches(task, count)))
  result["seconds"]["hf_batches"] = time.time() - t
  log(f"{len(train_hf_batches)} batches in HF's layout ({time.time() - t:.0f} s)")
  valid = list(valid_batches(task, args.heldout_batches)) if args.heldout_batches else []
  valid_hf_batches = hf_batches(task, template, enumerate(valid))
  # HF's labels path and the gathered path give the same loss (step 0, no dropout).
  check = hf_model(task.model_config, state0, dropout=0.0).train()
  with torch.no_grad():
    full = float(hf_loss(check, train_hf_batches[0], full_logits=True))
    gathered = float(hf_loss(check, train_hf_batches[0]))
  result["hf_labels_vs_gathered_loss"] = [full, gathered]
  log(f"HF step-0 loss: with labels {full:.7f}, predicted positions only {gathered:.7f}")
  del check

  # exact: dropout 0, ours and hf.
  if args.exact_steps:
    task0 = build_task(f, dropout=0.0)
    ours0 = train_ours(task0, args.exact_steps, weights=initial, log=log, name="exact ours")
    hf0 = train_hf(hf_model(task.model_config, state0, dropout=0.0),
                   train_hf_batches[:args.exact_steps], settings, args.seed, log, "exact hf",
                   args.full_logits)
    result["arms"]["exact_ours"] = strip(ours0, ends)
    result["arms"]["exact_hf"] = strip(hf0, ends)
    cmp = compare(ours0["loss"], hf0["loss"])
    cmp["rel_max_diff"] = float(np.max(np.abs(np.subtract(ours0["loss"], hf0["loss"])) /
                                       np.abs(hf0["loss"])))
    cmp["grad_norm_max_rel_diff"] = float(np.max(
        np.abs(np.subtract(ours0["grad_norm"], hf0["grad_norm"])) / np.abs(hf0["grad_norm"])))
    result["comparisons"]["exact_ours_vs_hf"] = cmp
    result["seconds"]["exact"] = ours0["seconds"] + hf0["seconds"]
    log(f"exact (dropout 0, {args.exact_steps} steps): max |ours - hf| {cmp['max_abs_diff']:.3g},"
        f" mean {cmp['mean_abs_diff']:.3g}; grad norms within {cmp['grad_norm_max_rel_diff']:.3g}"
        " (relative)")
    save()

  if steps:
    # replay: the run itself.
    replay = train_ours(task, steps, log=log, name="replay", checkpoints=ckpts, lr_at=lr_at)
    mismatch = {k: float(np.max(np.abs(replay["initial"][k] - initial[k]))) for k in initial}
    result["arms"]["replay"] = strip(replay, ends)
    replay_curve = dict(result["arms"]["replay"]["curve"])
    vs_log = [(s, v, replay_curve[s], replay_curve[s] - v) for s, v in logged if s in replay_curve]
    result["comparisons"]["replay_vs_log"] = {
        "points": vs_log, "max_abs_diff": max((abs(d) for *_, d in vs_log), default=None),
        "log_rounding": 5e-5}
    result["seconds"]["replay"] = replay["seconds"]
    log(f"replay vs log: max |diff| {result['comparisons']['replay_vs_log']['max_abs_diff']} "
        f"over {len(vs_log)} logged loops (the log rounds to 4 decimals); step-0 weights "
        f"{max(mismatch.values()):.3g} from the rebuilt ones; lr max |diff| "
        f"{replay['lr_max_abs_diff']:.3g}")
    save()

    hf = train_hf(hf_model(task.model_config, state0), train_hf_batches[:steps], settings,
                  args.seed, log, "hf", args.full_logits)
    result["arms"]["hf"] = strip(hf, ends)
    result["comparisons"]["replay_vs_hf"] = compare(replay["loss"], hf["loss"])
    result["seconds"]["hf"] = hf["seconds"]
    if valid_hf_batches:
      result["heldout"]["replay"] = heldout_ours(task, replay["model"], valid)
      result["heldout"]["hf"] = heldout_hf(hf["model"], valid_hf_batches)
      log(f"held-out: ours {result['heldout']['replay']:.4f}, hf {result['heldout']['hf']:.4f}")
    save()

    if args.null_arm:
      null = train_ours(task, steps, weights=initial, dropout_shift=1_000_003, log=log,
                        name="null (ours, other dropout masks)")
      result["arms"]["null"] = strip(null, ends)
      result["comparisons"]["replay_vs_null"] = compare(replay["loss"], null["loss"])
      result["seconds"]["null"] = null["seconds"]
      if valid:
        result["heldout"]["null"] = heldout_ours(task, null["model"], valid)
      save()

    if args.hf_init_arm:
      torch.manual_seed(args.seed)
      init_model = hf_model(task.model_config)
      init_state = {k: v.detach().clone() for k, v in init_model.state_dict().items()}
      weights = our_weights(template, init_state)
      result["hf_init_identical"] = identical_groups(weights)
      ours_i = train_ours(task, steps, weights=weights, log=log, name="hf_init ours")
      hf_i = train_hf(init_model, train_hf_batches[:steps], settings, args.seed, log,
                      "hf_init hf", args.full_logits)
      result["arms"]["hf_init_ours"] = strip(ours_i, ends)
      result["arms"]["hf_init_hf"] = strip(hf_i, ends)
      result["comparisons"]["hf_init_ours_vs_hf"] = compare(ours_i["loss"], hf_i["loss"])
      result["comparisons"]["replay_vs_hf_init_ours"] = compare(replay["loss"], ours_i["loss"])
      result["seconds"]["hf_init"] = ours_i["seconds"] + hf_i["seconds"]
      if valid:
        result["heldout"]["hf_init_ours"] = heldout_ours(task, ours_i["model"], valid)
        result["heldout"]["hf_init_hf"] = heldout_hf(hf_i["model"], valid_hf_batches)
      save()

  result["seconds"]["total"] = time.time() - t_start
  save()
  for name, c in result["comparisons"].items():
    if name == "replay_vs_log":
      continue
    line = f"{name}: max |diff| {c['max_abs_diff']:.4g}, mean |diff| {c['mean_abs_diff']:.4g}"
    if "last" in c:
      last = c["last"]
      line += (f"; last {last['steps']} steps: {last['mean_a']:.4f} vs {last['mean_b']:.4f}, "
               f"diff {last['mean_diff']:+.4f} (se {last['se_blocks']:.4f} blocks, "
               f"{last['se_naive']:.4f} naive)")
    log(line)
  if result["heldout"]:
    log("held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result["heldout"].items()))
  log(f"wrote {args.out} ({result['seconds']['total']:.0f} s)")


if __name__ == "__main__":
  main()
