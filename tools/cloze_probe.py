"""Zero-shot cloze on a finished quickstart: each
objective's random weights (step 0) and final pretraining checkpoint score the RACE-format
questions of one split with no fine-tuning (pretraining/cloze.py).

  python tools/cloze_probe.py --output_dir=output/quickstart --preset=small --split=dev

Prints one line per (objective, step) and writes OUTPUT_DIR/cloze_SPLIT.json. Choose the
scoring (sum or mean of the option's log-probabilities) on dev; read test once.
"""

import argparse
import json
import os
import time

from data_utils import fileio
from data_utils import tokenization
from finetuning import race
from pretraining import cloze, objectives
from reproduction import diagnostics
from reproduction import pipeline as pipeline_lib
from reproduction.presets import PRESETS


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output_dir", required=True, help="The quickstart's output directory.")
  parser.add_argument("--preset", default="small", choices=sorted(PRESETS),
                      help="The preset that run used.")
  parser.add_argument("--seed", type=int, default=0, help="The seed that run used.")
  parser.add_argument("--split", default="dev", choices=["dev", "test"],
                      help="The RACE-format split to score (choose on dev, read test once).")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  pipe = pipeline_lib.Pipeline(PRESETS[args.preset], args.output_dir, seed=args.seed)
  diag = diagnostics.Diagnostics(pipe)
  tokenizer = tokenization.Tokenizer(pipe.spm, lower=False)   # the quickstart's is cased
  items = race.read_split(fileio.join(pipe.data, "RACE"), args.split, report=lambda _: None)
  results = {}
  for name in pipeline_lib.OBJECTIVES:
    task = diag.task(name)
    for step in (0, pipe.p.pretrain_steps):
      start = time.time()
      result = cloze.evaluate(objectives.get(name), task, diag.model(task, step), tokenizer,
                              items, pipe.p.seq_len)
      results[f"{name}@{step}"] = result
      print(f"{name} step {step}: " + ", ".join(
          f"{k} {v['accuracy']:.3f} (se {v['se']:.3f})" for k, v in result.items())
            + f", n {len(items)}, {time.time() - start:.0f} s", flush=True)
  path = fileio.join(args.output_dir, f"cloze_{args.split}.json")
  fileio.write_atomic(path, json.dumps(results, indent=1) + "\n")
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
