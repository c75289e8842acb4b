"""TPU and multi-host pieces, short of a device (no TPU here): the TPU flags reach the cluster
resolver (mocked), replicas are whole hosts, hosts read the shards the writer's tasks wrote,
each replica's batches have static shapes and keep their lanes, and the host loop is one graph
loop around an XLA-compiled step with no host-side Python."""

import os

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from data_utils import pipeline, record_format
from tests import pretrain_helpers as ph
from training import distribution
from training import flags as training_flags


@pytest.fixture
def tpu_calls(monkeypatch):
  """The TPU API get_strategy uses, recorded instead of called."""
  calls = []

  class Resolver:
    def __init__(self, **kwargs):
      calls.append(("resolver", kwargs))

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
  monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                      lambda r: calls.append(("connect", type(r).__name__)))
  monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                      lambda r: calls.append(("initialize", type(r).__name__)))
  monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: ("TPUStrategy", r))
  return calls


def parse(*argv):
  values = flags.FlagValues()
  training_flags.define_training_flags("pretrain", flag_values=values)
  values(["run_pretrain.py", *argv])
  return values


def strategy_from(values):
  return distribution.get_strategy(values.distribution_strategy, values.tpu,
                                   tpu_zone=values.tpu_zone, gcp_project=values.gcp_project)


def test_tpu_vm_resolves_the_local_tpu(tpu_calls):
  strategy = strategy_from(parse("--tpu=local"))
  assert strategy[0] == "TPUStrategy"
  assert tpu_calls == [("resolver", {"tpu": "local"}), ("initialize", "Resolver")]


def test_tpu_by_name_passes_zone_and_project(tpu_calls):
  strategy_from(parse("--tpu=my-pod", "--tpu_zone=us-central2-b", "--gcp_project=proj"))
  assert tpu_calls == [("resolver", {"tpu": "my-pod", "zone": "us-central2-b",
                                     "project": "proj"}),
                       ("connect", "Resolver"), ("initialize", "Resolver")]


def test_tpu_strategy_flag_and_script_flags(tpu_calls, monkeypatch):
  strategy_from(parse("--distribution_strategy=tpu"))      # the VM's TPU_NAME / metadata
  assert tpu_calls[0] == ("resolver", {"tpu": ""})
  tpu_calls.clear()
  # Scripts that pass only (strategy, tpu) still get --tpu_zone / --gcp_project from FLAGS.
  monkeypatch.setattr(distribution, "_flag", {"tpu_zone": "z", "gcp_project": "p"}.get)
  distribution.get_strategy("default", "name")
  assert tpu_calls[0] == ("resolver", {"tpu": "name", "zone": "z", "project": "p"})


def test_multi_worker_needs_tf_config(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(ValueError, match="needs TF_CONFIG"):
    distribution.get_strategy("multi_worker_mirrored")


def test_chief_is_worker_0_unless_a_chief_is_named(monkeypatch):
  class Strategy(tf.distribute.MultiWorkerMirroredStrategy):
    cluster_resolver = None                   # the property, replaced: no cluster here

    def __init__(self, task_type, task_id):   # no super().__init__: it would start one
      self.cluster_resolver = type("R", (), {"task_type": task_type, "task_id": task_id})

  monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}}')
  assert distribution.is_chief(Strategy("worker", 0))
  assert not distribution.is_chief(Strategy("worker", 1))
  assert distribution.is_chief(tf.distribute.get_strategy())
  with distribution.write_dir(Strategy("worker", 1), "gs://b/run") as out:
    assert os.path.isdir(out) and not out.startswith("gs://")
  assert not os.path.exists(out)
  with distribution.write_dir(Strategy("worker", 0), "gs://b/run") as out:
    assert out == "gs://b/run"
  monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["c:0"], "worker": ["a:1"]}}')
  assert distribution.is_chief(Strategy("chief", 0))
  assert not distribution.is_chief(Strategy("worker", 0))


def test_replicas_are_whole_hosts():
  assert distribution.num_hosts(32, 8) == 4          # v3-32 pod slice: 4 hosts of 8 cores
  assert distribution.num_hosts(8, 8, expected=1) == 1
  for replicas, cores, hosts in ((6, 4, None), (8, 8, 2), (4, 8, None)):
    with pytest.raises(ValueError, match="num_core_per_host"):
      distribution.num_hosts(replicas, cores, hosts)


@pytest.fixture(scope="module")
def shards(tmp_path_factory, text_and_sp):
  """Records laid out for 2 cores per host, in 4 shards; task 1 of --num_tasks=2 alone; and
  records for 1 core."""
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("dist")
  params = record_format.RecordParams(seq_len=ph.SEQ, reuse_len=ph.REUSE, perm_size=ph.REUSE,
                                      num_predict=ph.NP, bsz_per_host=ph.BSZ,
                                      num_core_per_host=2, uncased=True)
  from data_utils import writer
  for out, tasks in (("all", {}), ("task1", {"num_tasks": 2, "task": 1})):
    writer.create(text, sp, str(base / out), params, shard_bytes=60_000,
                  progress=lambda m: None, **tasks)
  ph.make_records(text, sp, base / "one")
  from data_utils.tokenization import Tokenizer
  return str(base), Tokenizer(sp, lower=True).vocab_size


def test_host_h_reads_what_writer_task_h_wrote(shards):
  """The release's multi-host layout (records written per host, --num_tasks=hosts): 2 hosts of
  bsz_per_host rows over records of bsz_per_host lanes read 2 files side by side, host h the
  files of writer task h only."""
  base, _ = shards
  params, files, _ = record_format.find_records(base + "/all")
  _, task1, _ = record_format.find_records(base + "/task1")
  assert len(files) >= 4
  layout = pipeline.plan_layout(params, len(files), ph.BSZ, 2, 2)
  assert (layout.streams, layout.groups) == (2, 1)
  assert layout.host_streams(1) == [1]
  assert [os.path.basename(f) for f in files[1::2]] == [os.path.basename(f) for f in task1]
  with pytest.raises(ValueError, match="needs 16 files read side by side"):
    pipeline.plan_layout(params, len(files[:2]), ph.BSZ, 2, 16)


def test_each_replica_has_static_shapes_and_keeps_its_lanes(shards):
  base, vocab = shards
  task = ph.tiny_task(base + "/all", vocab, cores=2, bi_data=True)
  host, skip = 1, 3
  ds = task.dataset(tf.distribute.InputContext(2, host, 4), skip_batches=skip)
  rows = ph.BSZ // 2
  for spec in ds.element_spec.values():              # per replica, fully static (TPU)
    assert spec.shape.is_fully_defined() and spec.shape[0] == rows
  assert task.tokens_per_step == ph.BSZ * 2 * ph.SEQ
  # This host's records in file order, batch by batch: step s hands rows [c*2, c*2+2) of its
  # batch s to replica c (records k of a file is lane k % bsz_per_host).
  params, files, _ = record_format.find_records(base + "/all")
  raw = tf.data.TFRecordDataset(files[host::2]).batch(ph.BSZ)    # host h: its writer task's
  host_batches = [pipeline.parse(b, params)["input_ids"].numpy() for b in raw.take(skip + 3)]
  got = [b["input_ids"].numpy() for b in ds.take(6)]
  for i, element in enumerate(got):
    step, core = divmod(i, 2)
    np.testing.assert_array_equal(element, host_batches[skip + step][core * rows:][:rows])
  with pytest.raises(ValueError, match="num_core_per_host=2"):
    task.dataset(tf.distribute.InputContext(2, 0, 2))    # 1 replica per host: wrong layout


@pytest.mark.slow
def test_host_loop_is_one_graph_loop_around_a_compiled_step(tmp_path, shards):
  base, vocab = shards
  task = ph.tiny_task(base + "/one", vocab, train_steps=5)
  trainer, losses = ph.train(task, tmp_path, steps_per_loop=2, save_every=5)
  assert len(losses) == 3                                   # host calls of 2, 2 and 1 steps
  assert trainer.host_loop.experimental_get_tracing_count() == 1   # steps: a tensor, no retrace
  (graph,) = [f.graph for f in trainer.host_loop._list_all_concrete_functions()]
  definition = graph.as_graph_def()
  ops = {n.op for n in definition.node}
  for function in definition.library.function:
    ops |= {n.op for n in function.node_def}
  assert ops & {"While", "StatelessWhile"}                   # tf.range: not unrolled
  assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}   # no host Python in the step
  compiled = [f for f in definition.library.function
              if f.attr["_XlaMustCompile"].b]                # the step: jit_compile=True
  assert compiled
