"""tf.distribute strategies by flag."""

import tensorflow as tf

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name="default", tpu=None, devices=None):
  """Builds the strategy. `--tpu=NAME` (a TPU name or grpc:// address) implies "tpu"."""
  if tpu:
    name = "tpu"
  if name not in STRATEGIES:
    raise ValueError(f"--distribution_strategy must be one of {STRATEGIES}, got {name!r}")
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(devices=devices)
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  return tf.distribute.get_strategy()
