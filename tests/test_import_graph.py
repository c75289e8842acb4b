"""The house plan holds (issue #32): imports point one way, from the entry scripts down to the
data layer, with no circle between files and no import back up (inside a function or not).

Inside modeling/, the two family packages (xlnet/, mpnet/) import neither each other nor are
imported by the shared modules; only the registries (families, loading, flags) know both.

Layers, top to bottom (a file may import its own package or any package below it):
  entry scripts (run_*.py, quickstart.py, data_utils/create_pretrain_data.py,
                 data_utils/train_tokenizer.py), bench/, tools/
  reproduction/     the quickstart's pipeline and report
  finetuning/       fine-tuning tasks (each exports itself through serving/)
  pretraining/      the pretraining task and its objectives (plm, mlm, mpnet: a registry)
  serving/          SavedModels on raw text
  training/         the loop, strategies, optimizer, the Task contract
  modeling/         models, checkpoints, weight files
  data_utils/       text, records, tokenizers, row layouts
The graph is read from the source (ast), every `import` statement wherever it stands.
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["data_utils", "modeling", "training", "serving", "pretraining", "finetuning",
          "inference", "reproduction"]
ENTRY = {"run_pretrain", "run_classifier", "run_squad", "run_race", "run_tagger", "run_pairs",
         "quickstart", "predict", "data_utils.create_pretrain_data", "data_utils.train_tokenizer"}
TOP = len(LAYERS)


def _modules():
  """module name -> path, for every .py of the packages and the entry scripts."""
  found = {}
  for name in os.listdir(ROOT):
    if name.endswith(".py") and name != "setup.py":
      found[name[:-3]] = os.path.join(ROOT, name)
  for package in LAYERS + ["bench", "tools"]:
    for directory, _, files in os.walk(os.path.join(ROOT, package)):
      for f in files:
        if f.endswith(".py"):
          rel = os.path.relpath(os.path.join(directory, f), ROOT)[:-3].replace(os.sep, ".")
          found[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = \
              os.path.join(directory, f)
  return found


def _imports(path, modules):
  """The project modules `path` imports (a package import counts as its __init__)."""
  tree = ast.parse(open(path, encoding="utf-8").read(), path)
  out = set()
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
    for name in names:
      while name and name not in modules:
        name = name.rpartition(".")[0]
      if name:
        out.add(name)
  return out


def _layer(module):
  if module in ENTRY or module.split(".")[0] in ("bench", "tools") or "." not in module and \
     module not in LAYERS:
    return TOP
  return LAYERS.index(module.split(".")[0])


def graph():
  modules = _modules()
  return {m: _imports(p, modules) - {m} for m, p in modules.items()}


def test_no_import_runs_back_up():
  up = sorted(f"{m} (layer {LAYERS[_layer(m)] if _layer(m) < TOP else 'top'}) imports {d}"
              for m, deps in graph().items() for d in deps if _layer(d) > _layer(m)
              or (_layer(d) == TOP and m != d and _layer(m) == TOP and d in ENTRY))
  assert not up, "imports that run back up:\n" + "\n".join(up)


def test_no_circle_between_files():
  g = graph()
  index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

  def visit(v):                      # Tarjan's strongly connected components
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in g.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        circles.append(sorted(component))

  for v in sorted(g):
    if v not in index:
      visit(v)
  assert not circles, f"files importing each other in a loop: {circles}"


FAMILIES = ("modeling.xlnet", "modeling.mpnet")
REGISTRIES = {"modeling.families", "modeling.loading", "modeling.flags"}   # know every family


def _family(module):
  return next((f for f in FAMILIES if module == f or module.startswith(f + ".")), None)


def test_the_families_stand_apart():
  """A family package imports no other family; the shared part of modeling/ imports none
  (only the registries, which know every family, do)."""
  bad = sorted(f"{m} imports {d}" for m, deps in graph().items() if m.startswith("modeling.")
               for d in deps if _family(d) and _family(d) != _family(m)
               and m not in REGISTRIES)
  assert not bad, "\n".join(bad)


def test_the_graph_is_read():
  """The reader sees the imports it judges (a broken reader would pass the two tests above)."""
  g = graph()
  assert "modeling.checkpoint" in g["modeling.loading"]
  assert "serving.export" in g["finetuning.classifier_task"]
  assert "data_utils.layouts" in g["serving.packing"]
  assert "modeling.mpnet.models" in g["modeling.families"]
  assert len(g) > 80


def test_test_modules_have_unique_names():
  """The test directories have no __init__.py, so pytest imports each test module by its file
  name: two of one name in different directories fail the suite's collection."""
  seen = {}
  for d, _, files in os.walk(os.path.join(ROOT, "tests")):
    for f in files:
      if f.startswith("test_") and f.endswith(".py"):
        seen.setdefault(f, []).append(os.path.relpath(os.path.join(d, f), ROOT))
  clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
  assert not clashes, clashes
  assert len(seen) > 50
