"""README, "Cloud TPU and multi-GPU" and "Serving, and sharing weights with Hugging Face": every
`python SCRIPT.py --flag` in the sections' bash blocks (including those inside `gcloud ...
--command="..."`) names a flag SCRIPT defines, as its `--helpfull` lists them."""

import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = ("## Cloud TPU and multi-GPU", "## Serving, and sharing weights with Hugging Face")
SEPARATORS = {";", "&&", "&", "|", "||"}


def section_commands():
  """[(script, [flag names])] of every python command in the sections' bash blocks."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  found = []
  for section in SECTIONS:
    assert section in text
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```bash\n(.*?)```", body, re.DOTALL):
      for line in block.replace("\\\n", " ").splitlines():
        found += commands_in(line)
  return found


def commands_in(line):
  lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
  lexer.whitespace_split, lexer.commenters = True, "#"
  tokens, found, segment = list(lexer), [], []
  for token in tokens + [";"]:
    if token.startswith("--command="):       # gcloud ... ssh --command="...": a nested line
      found += commands_in(token[len("--command="):])
    if token in SEPARATORS:
      words = [t for t in segment if not re.match(r"^\w+=", t)]   # drop VAR=value prefixes
      if len(words) > 1 and words[0] in ("python", "python3") and words[1].endswith(".py"):
        found.append((words[1], [t[2:].split("=")[0] for t in words[2:] if t.startswith("--")]))
      segment = []
    else:
      segment.append(token)
  return found


def defined_flags(scripts):
  procs = {s: subprocess.Popen([sys.executable, s, "--helpfull"], cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
           for s in scripts}
  try:
    out = {s: p.communicate(timeout=300)[0] for s, p in procs.items()}
  finally:
    for p in procs.values():
      p.kill()
  return {s: set(re.findall(r"^\s+--(?:\[no\])?(\w+):", text, re.MULTILINE)) for s, text in out.items()}, \
      {s: set(re.findall(r"^\s+--\[no\](\w+):", text, re.MULTILINE)) for s, text in out.items()}


def test_readme_section_names_only_defined_flags():
  commands = section_commands()
  scripts = sorted({s for s, _ in commands})
  assert {"run_pretrain.py", "run_classifier.py", "data_utils/create_pretrain_data.py",
          "data_utils/train_tokenizer.py"} <= set(scripts)
  named = {f for _, fl in commands for f in fl}
  assert {"tpu", "tpu_zone", "num_core_per_host", "distribution_strategy", "num_tasks", "task",
          "init_checkpoint", "export_dir", "export_hf_dir"} <= named
  defined, booleans = defined_flags(scripts)
  missing = []
  for script, used in commands:
    assert defined[script], f"{script} --helpfull listed no flags"
    for name in used:
      negated = name.startswith("no") and name[2:] in booleans[script]
      if name not in defined[script] and not negated:
        missing.append(f"{script} --{name}")
  assert not missing, missing


def test_the_parser_reads_nested_and_prefixed_commands():
  line = ('gcloud x ssh --worker=$T --command="cd a && python d/w.py --input_glob=\'$B/*.txt\' '
          '--task=$T" & X=1 python r.py --a=1 --nob # --c')
  assert commands_in(line) == [("d/w.py", ["input_glob", "task"]), ("r.py", ["a", "nob"])]
