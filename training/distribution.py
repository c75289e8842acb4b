"""tf.distribute strategies by flag, and which worker writes.

  --tpu=NAME|local [--tpu_zone --gcp_project]  TPUStrategy (a TPU VM: --tpu=local; a TPU
                                               reached by name: zone/project go to the resolver)
  --distribution_strategy=mirrored             every GPU of this host (or listed devices)
  --distribution_strategy=multi_worker_mirrored  several hosts, from TF_CONFIG
  --distribution_strategy=one_device | default

Multi-client strategies (multi_worker_mirrored) run the same program on every host. Every
host restores from the same model_dir and takes part in every collective (a checkpoint's state
gather, the save itself); only the chief publishes files. `write_dir` gives the others a
temporary local directory to write into, removed when training ends (the TF2 pattern).
"""

import contextlib
import json
import os
import shutil
import tempfile

import tensorflow as tf

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def _flag(name):
  """An absl flag's value if the running script defines it (fine-tuning scripts share
  --tpu_zone / --gcp_project through training/flags.py), else None."""
  from absl import flags
  try:
    return getattr(flags.FLAGS, name)
  except (AttributeError, flags.UnparsedFlagAccessError):
    return None


def tpu_resolver(tpu, zone=None, project=None):
  """TPUClusterResolver for --tpu: "local" on a TPU VM (the TPU attached to this host; zone
  and project unused), otherwise a TPU name (or grpc:// address) looked up in --tpu_zone /
  --gcp_project (None: the resolver asks the VM's metadata server)."""
  resolver_cls = tf.distribute.cluster_resolver.TPUClusterResolver
  if tpu == "local":
    return resolver_cls(tpu="local")
  kwargs = {k: v for k, v in (("zone", zone), ("project", project)) if v}
  return resolver_cls(tpu=tpu or "", **kwargs)


def get_strategy(name="default", tpu=None, devices=None, tpu_zone=None, gcp_project=None):
  """Builds the strategy. `--tpu=NAME|local` implies "tpu"."""
  if tpu:
    name = "tpu"
  if name not in STRATEGIES:
    raise ValueError(f"--distribution_strategy must be one of {STRATEGIES}, got {name!r}")
  if name == "tpu":
    resolver = tpu_resolver(tpu, tpu_zone or _flag("tpu_zone"),
                            gcp_project or _flag("gcp_project"))
    if tpu != "local":          # a TPU VM's local TPU needs no remote cluster connection
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(devices=devices)
  if name == "multi_worker_mirrored":
    if not os.environ.get("TF_CONFIG"):
      raise ValueError("--distribution_strategy=multi_worker_mirrored needs TF_CONFIG (the "
                       "cluster and this host's task; docs/tpu-gpu.md)")
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  return tf.distribute.get_strategy()


def replicas(strategy):
  return strategy if isinstance(strategy, int) else strategy.num_replicas_in_sync


def hosts(strategy):
  """Input pipelines of the job: the workers of multi-worker mirrored, the hosts of a TPU
  system, else 1."""
  if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return max(1, strategy.extended._num_workers)  # pylint: disable=protected-access
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return strategy.extended.num_hosts
  return 1


def num_hosts(strategy, num_core_per_host, expected=None):
  """Hosts of the job: the strategy's replicas must be whole hosts of num_core_per_host (a
  v3-32 pod slice: 32 replicas, 8 per host, 4 hosts). `expected` (--num_hosts, or the
  strategy's hosts), when given, must agree."""
  replicas = strategy if isinstance(strategy, int) else strategy.num_replicas_in_sync
  hosts, extra = divmod(replicas, num_core_per_host)
  if extra or not hosts or (expected and hosts != expected):
    given = f" x --num_hosts={expected}" if expected else ""
    raise ValueError(f"--num_core_per_host={num_core_per_host}{given} but the strategy has "
                     f"{replicas} replicas")
  return hosts


def is_multi_client(strategy):
  """True when each host runs its own copy of the program (multi-worker mirrored)."""
  return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and \
      strategy.extended._num_workers > 1


def task_of(strategy):
  """(task_type, task_id) of this host; (None, None) for single-client strategies."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return None, None
  resolver = strategy.cluster_resolver
  return resolver.task_type, resolver.task_id


def is_chief(strategy):
  """The host that publishes files: task "chief", or worker 0 when the cluster has no chief."""
  task_type, task_id = task_of(strategy)
  if task_type is None:
    return True
  if task_type == "chief":
    return True
  cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
  return task_type == "worker" and task_id == 0 and "chief" not in cluster


@contextlib.contextmanager
def write_dir(strategy, model_dir):
  """Where this host writes: model_dir on the chief; elsewhere a temporary local directory,
  removed when the block ends (its checkpoints and logs are the chief's, discarded)."""
  if is_chief(strategy):
    yield model_dir
    return
  task_type, task_id = task_of(strategy)
  tmp = tempfile.mkdtemp(prefix=f"xlnet-{task_type}{task_id}-")
  try:
    yield tmp
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
