import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

from data_utils import cli_app  # noqa: E402

COMPILE_CACHE_ENV = "XLNET_COMPILE_CACHE"     # training/compile_cache.py's variable


def pytest_configure(config):
  """One XLA compilation cache for the whole session, in a fresh temporary directory (unless
  XLNET_COMPILE_CACHE is already set: a run that chose its own cache, or "off", keeps it). The
  controller sets it before pytest-xdist starts its workers, which inherit the environment and
  so find it set, as does every subprocess a test starts: a program compiled by one test is
  loaded by the next, and no test reads or fills the user's own ~/.cache."""
  if COMPILE_CACHE_ENV in os.environ:
    return
  path = tempfile.mkdtemp(prefix="xlnet-test-xla-cache-")
  os.environ[COMPILE_CACHE_ENV] = path
  config._xlnet_compile_cache = path           # made here: removed by this process only


# The collector as an entry script sets it (data_utils/cli_app.py, collect_less): the tests
# trace hundreds of models in each process, and Python's default thresholds scan the heap that
# TensorFlow's import and those graphs make over and over. What collection imported (TensorFlow,
# the test modules) is frozen: never scanned again. Runs in a subprocess or forked from the warm
# server start from Python's own settings, as a user's would.
cli_app.collect_less()


def pytest_collection_finish(session):
  import gc  # pylint: disable=import-outside-toplevel
  gc.freeze()


def pytest_unconfigure(config):
  """The process that made the cache removes it once its session ends: the controller (or a
  run without workers). A pytest-xdist worker (`config.workerinput`) inherited the controller's
  and made none, so it never removes the directory the other worker still uses. Every process
  stops its own warm server (tests/warm.py) here."""
  from tests import warm
  warm.close()
  path = getattr(config, "_xlnet_compile_cache", None)
  if path:
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def text_and_sp(tmp_path_factory):
  """(corpus path, SentencePiece model path): ~200 KB of stdlib docstrings, 800 pieces."""
  from tests import data_fixtures
  directory = str(tmp_path_factory.mktemp("text"))
  text = data_fixtures.make_corpus(directory)
  return text, data_fixtures.make_sp_model(directory, text)


@pytest.fixture(scope="session")
def tok(text_and_sp):
  """The uncased Tokenizer of `text_and_sp`'s SentencePiece model (800 pieces)."""
  from data_utils.tokenization import Tokenizer
  return Tokenizer(text_and_sp[1], lower=True)


# The longest modules first (`make test`: two pytest-xdist workers, `--dist loadscope
# --no-loadscope-reorder`, so each module runs whole on one worker, in this order): every module
# whose tests take a quarter of a minute or more in the full suite (pytest --junitxml: the sum
# of its tests' times), longest first. A long module collected last would end the run alone
# while the other worker idles, and a module split between the workers builds its module
# fixtures twice. Modules not named keep their collection order after these; re-measure and
# re-sort when a module grows.
LONGEST_FIRST = [
    "tests/reproduction/test_quickstart.py",
    "tests/pretraining/test_pretrain.py",
    "tests/serving/test_serving.py",
    "tests/pretraining/test_any_layout.py",
    "tests/training/test_float16.py",
    "tests/modeling/test_recompute.py",
    "tests/training/test_deterministic.py",
    "tests/training/test_sweep_one_program.py",
    "tests/training/test_run_record.py",
    "tests/serving/test_serving_bytes.py",
    "tests/training/test_preemption.py",
    "tests/modeling/test_recompute_flags.py",
    "tests/training/test_multiworker.py",
    "tests/test_cloud_paths.py",
    "tests/modeling/xlnet/test_model.py",
    "tests/training/test_training_steps.py",
    "tests/finetuning/test_mpnet_finetune.py",
    "tests/pretraining/test_information_flow.py",
    "tests/finetuning/test_pairs.py",
    "tests/pretraining/test_cloze.py",
    "tests/modeling/mpnet/test_mpnet_pretrain.py",
    "tests/data_utils/test_sp_graph.py",
    "tests/finetuning/test_tagging.py",
    "tests/serving/test_tagging_serving.py",
    "tests/data_utils/test_fuzz_pretrain_text.py",
    "tests/finetuning/test_unlabelled_eval.py",
    "tests/training/test_traces.py",
    "tests/test_bench_memory.py",
    "tests/serving/test_embedding_serving.py",
    "tests/pretraining/test_heldout_eval.py",
    "tests/reproduction/test_scheduler.py",
    "tests/finetuning/test_race.py",
    "tests/finetuning/test_custom_data.py",
    "tests/modeling/xlnet/test_hf_xlnet.py",
    "tests/training/test_best_checkpoint.py",
    "tests/pretraining/test_xlnet_training_parity.py",
    "tests/data_utils/test_warm_start.py",
    "tests/training/test_corrupt_inputs.py",
    "tests/pretraining/test_record_defaults.py",
    "tests/finetuning/test_fuzz_classifier.py",
    "tests/inference/test_from_pretrained_hf.py",
]


# Whole modules left out of the fast tier (`make test-fast`: -m "not slow"): their module
# fixtures train or export models before the first test. Single long tests carry their own
# @pytest.mark.slow; `make test` runs everything.
SLOW_MODULES = {
    "tests/pretraining/test_pretrain.py",
    "tests/serving/test_serving.py",
    "tests/training/test_run_record.py",
    "tests/training/test_float16.py",
    "tests/test_cloud_paths.py",
}


def pytest_collection_modifyitems(config, items):
  """Modules in LONGEST_FIRST's order, then the rest; each module's tests keep their order
  (a stable sort on the module alone), so module fixtures are still built once. The tests of
  SLOW_MODULES are marked slow."""
  for item in items:
    if item.nodeid.split("::", 1)[0] in SLOW_MODULES:
      item.add_marker(pytest.mark.slow)
  rank = {path: k for k, path in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
