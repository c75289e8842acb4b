"""predict.py's library call: a file of raw text in, a predictions file out.

Inputs (the format from the name's ending):
  .tsv / .csv / .jsonl   a table with named columns, read by finetuning/table_data.py (the
                         reader of run_classifier.py --task_name=custom): the text column
                         (`text`), optionally a second text, an id (`id`: else INPUT-LINE) and a
                         label kept as `gold`;
  .txt                   one text per line (blank lines skipped; ids are line numbers).
Output: JSON Lines in the layout of every predictions file of the project
(finetuning/predictions.py): `id`, `text_a` (`text_b`), `prediction`, `probabilities` ({label:
p}, summing to 1) or `score` for a regression model, and `gold` when the input has labels;
published atomically. An existing output file is replaced only when it is a predictions file
(its first line an object with `id` and `prediction`): anything else is somebody's and refused.

Every refusal is one line naming the flag or the file (and line), and comes before the model is
loaded: the input is read whole first.
"""

import json

from data_utils import fileio, outputs
from finetuning import predictions, table_data

TEXT_FORMATS = (".txt",)
PROGRESS_EVERY = 2048      # rows between two progress lines (files longer than that)


def input_format(path):
  """tsv, csv, jsonl or txt from PATH's ending (one-line ValueError naming --input else)."""
  if str(path).lower().endswith(TEXT_FORMATS):
    return "txt"
  try:
    return table_data.file_format(path, "input")
  except ValueError:
    raise ValueError(f"--input={path}: unknown format: name the file .tsv, .csv, .jsonl or "
                     ".txt") from None


def read_inputs(path, columns):
  """The examples of PATH (classifier_data.Example: guid, text_a, text_b, label or None)."""
  if input_format(path) == "txt":
    return _read_lines(path, columns)
  return table_data.read_table(path, "input", columns, report=lambda line: None)


def _read_lines(path, columns):
  from finetuning import classifier_data
  if columns.text_b is not None:
    raise ValueError(f"--text_b_column={columns.text_b}: a .txt input holds one text per line; "
                     "pass a .tsv, .csv or .jsonl file for pairs")
  if not fileio.exists(path) or fileio.isdir(path):
    raise FileNotFoundError(f"--input={path}: not found")
  data = fileio.read_bytes(path)
  if data.startswith(b"\xef\xbb\xbf"):
    data = data[3:]
  examples = []
  for k, line in enumerate(data.split(b"\n"), 1):
    try:
      text = line.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as e:
      raise ValueError(f"{path}:{k}: not UTF-8 (byte 0x{line[e.start]:02x}); the file must be "
                       "UTF-8") from None
    if text.strip():
      examples.append(classifier_data.Example(f"input-{k}", text))
  if not examples:
    raise ValueError(f"--input={path}: no texts (every line is blank)")
  return examples


def is_predictions_file(path):
  """Whether PATH's first line is a predictions file's object (`id` and `prediction`)."""
  try:
    with fileio.open_text(path, errors="replace") as f:
      first = f.readline()
    row = json.loads(first)
  except (OSError, ValueError):
    return False
  return isinstance(row, dict) and "id" in row and "prediction" in row


def check_output(path, input_path):
  """One line (ValueError) unless PATH may receive the predictions: not the input, not a
  directory, and absent or an earlier predictions file."""
  outputs.check_file(path, "output")
  if outputs.same_place_key(path) == outputs.same_place_key(input_path):
    raise ValueError(f"--output={path} is --input; pass another path")
  if fileio.exists(path) and not is_predictions_file(path):
    raise ValueError(f"--output={path}: exists and is not a predictions file of this project "
                     "(nothing was written); pass another path, or move that file away")


def prediction_rows(model, examples, outs):
  """The output rows of EXAMPLES and their predictions OUTS (Model.predict's dicts)."""
  pair = any(ex.text_b is not None for ex in examples)
  for ex, out in zip(examples, outs):
    row = {"id": ex.guid, "text_a": ex.text_a}
    if pair:
      row["text_b"] = ex.text_b
    if model.regression:
      row["prediction"] = row["score"] = out["score"]
    else:
      row["prediction"] = out["label"]
      row["probabilities"] = out["probabilities"]
    if ex.label is not None:
      row["gold"] = ex.label
    yield row


def predict_file(model_path, input_path, output_path, columns=None, batch_size=32,
                 max_length=None, overrides=None, log=print):
  """Predicts every text of INPUT_PATH with the classifier at MODEL_PATH (anything
  inference.from_pretrained reads) and writes OUTPUT_PATH (module docstring). COLUMNS: a
  finetuning/table_data.Columns; OVERRIDES: from_pretrained's keywords (sp_model, ...).
  Returns the number of rows written."""
  from inference.loading import from_pretrained
  from inference.sources import describe
  columns = columns or table_data.Columns()
  input_format(input_path)
  check_output(output_path, input_path)
  examples = read_inputs(input_path, columns)
  found = describe(model_path, overrides)      # no head: refused before any loading
  if found.head != "classifier":
    raise ValueError(f"--model={model_path}: holds no classification head ({found.kind}); "
                     "pass a fine-tuned classifier (a run_classifier.py run, a Hugging Face "
                     "*ForSequenceClassification directory)")
  model = from_pretrained(model_path, batch_size=batch_size, log=log,
                                  **dict(overrides or {}, **({"max_length": max_length}
                                                             if max_length else {})))
  outs, n = [], len(examples)
  step = max(PROGRESS_EVERY // model.batch_size, 1) * model.batch_size
  for start in range(0, n, step):
    part = examples[start:start + step]
    outs += model.predict([ex.text_a for ex in part],
                          None if part[0].text_b is None else [ex.text_b for ex in part])
    if n > step and log:
      log(f"predicted {min(start + step, n):,} of {n:,} rows")
  predictions.write_jsonl(output_path, prediction_rows(model, examples, outs))
  if log:
    log(f"wrote {n:,} predictions to {output_path}")
  return n
