"""Small pretraining runs for the tests."""

import numpy as np
import tensorflow as tf

from data_utils import record_format, writer
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from pretraining.task import PretrainConfig, PretrainTask
from training.trainer import Trainer

SEQ, REUSE, NP, BSZ = 32, 16, 5, 4


def make_records(text, sp, out, cores=1, bi_data=False, max_bytes=None):
  params = record_format.RecordParams(seq_len=SEQ, reuse_len=REUSE, perm_size=REUSE,
                                      num_predict=NP, bsz_per_host=BSZ, num_core_per_host=cores,
                                      bi_data=bi_data, uncased=True)
  writer.create(text, sp, str(out), params, shard_bytes=max_bytes or 10**9,
                progress=lambda m: None)
  return str(out)


def tiny_task(record_dir, vocab, cores=1, bi_data=False, mem_len=2 * REUSE, dropout=0.0,
              objective="plm", lr=3e-3, train_steps=20, nsp_weight=0.0, **config):
  model_config = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                             n_token=vocab)
  run_config = RunConfig(dropout=dropout, dropatt=dropout, mem_len=mem_len, reuse_len=REUSE,
                         bi_data=bi_data)
  config = PretrainConfig(record_dir=record_dir, seq_len=SEQ, reuse_len=REUSE, num_predict=NP,
                          bsz_per_host=BSZ, num_core_per_host=cores, bi_data=bi_data,
                          objective=objective, learning_rate=lr, train_steps=train_steps,
                          warmup_steps=2, nsp_weight=nsp_weight, **config)
  return PretrainTask(config, model_config, run_config)


def train(task, model_dir, strategy=None, steps_per_loop=5, save_every=10, log=None,
          xla="full", keep_checkpoints=5, checkpoint_state=True):
  trainer = Trainer(task, strategy or tf.distribute.get_strategy(), str(model_dir),
                    task.config.train_steps, steps_per_loop, save_every,
                    keep_checkpoints=keep_checkpoints, xla=xla, log=log or (lambda m: None),
                    checkpoint_state=checkpoint_state)
  history = trainer.train()
  return trainer, np.array([loss for _, loss in history])
