"""The records writer on Apache Beam: the local writer's shards, bytes and manifest, written by
any Beam runner (DataflowRunner on gs://, FlinkRunner, SparkRunner; DirectRunner to try it).

This process (the launcher) does what a local run does before writing (data_utils/writer.py's
`prepare`: the same one-line checks of flags, inputs and --output_dir before any work, the same
plan of shards, the claim of --output_dir, the clean-up of a rerun), then runs one pipeline:

  the shards still to write -> Reshuffle (spread over the workers) -> WriteShard (one shard per
  element: writer.write_shard, the local path's code, so the same bytes for the same seed)
  -> one list of the shards done -> the manifest (data_utils/manifest.py), written once every
  planned shard is complete.

Restartable and idempotent per shard, as runners retry bundles and may run an element twice:
each attempt writes its record file and then its record-info under a temporary name of its own
(fileio.tmp_name: process id and a random suffix) and renames it whole, and the content depends
only on the shard and the seed, so a retried or duplicated element rewrites the same bytes and
never a mixture; an element whose shard is already complete (rerun.shard_state "done": a
duplicate, or a restarted job) writes nothing. Temporaries of attempts that died are removed
when the job ends (and by any rerun). Shards already complete when the job starts are not sent
to the pipeline at all; with nothing to write, no job is started.

DirectRunner here is Beam's in-process direct runner (BundleBasedDirectRunner: it retries a
failed bundle, and ram:// paths, which live in one process, work): Beam's own DirectRunner would
first try the Prism runner, a binary it downloads. With --beam_pipeline_options=
'--direct_running_mode=multi_processing --direct_num_workers=N' it is Beam's portable direct
runner (FnApiRunner) with N worker processes, each DoFn pickled and sent to them as a cluster's
workers get it (no retries there). Both are for trying a pipeline out: the local runner
(--runner=local, processes) is the fast way to write on one machine. Every other runner
gets its name and --beam_pipeline_options as Beam parses them; its workers need this project
installed (Dataflow: --setup_file=./pyproject.toml) and read and write through tf.io.gfile.
"""

import contextlib
import io
import json
import logging
import shlex

from data_utils import fileio, manifest, rerun, writer


def _import_beam():
  """apache_beam, or None when the [beam] extra is not installed (`check` says so in one line).
  Its import logs a warning about optional Google Cloud client libraries through the root
  logger; with no handler configured yet, that goes nowhere instead of to stderr."""
  root = logging.getLogger()
  quiet = None if root.handlers else logging.NullHandler()
  if quiet:
    root.addHandler(quiet)
  try:
    import apache_beam  # pylint: disable=import-outside-toplevel
    return apache_beam
  except ImportError:
    return None
  finally:
    if quiet:
      root.removeHandler(quiet)


beam = _import_beam()

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")
INSTALL = "pip install -e '.[beam]'"
log = logging.getLogger("create_pretrain_data")


def check(runner, pipeline_options=""):
  """Raises ValueError (one line naming the flag) unless RUNNER is a Beam runner this writer
  runs on, Apache Beam is installed and --beam_pipeline_options parse. Returns (the runner: a
  name, or the in-process direct runner, PipelineOptions)."""
  if runner not in RUNNERS:
    raise ValueError(f"--runner={runner}: expected local or one of {', '.join(RUNNERS)}")
  if beam is None:
    raise ValueError(f"--runner={runner} needs Apache Beam, which is not installed: {INSTALL}")
  try:
    args = shlex.split(pipeline_options or "")
  except ValueError as e:
    raise ValueError(f"--beam_pipeline_options={pipeline_options!r}: {e}") from None
  if any(a == "--runner" or a.startswith("--runner=") for a in args):
    raise ValueError("--beam_pipeline_options: give the runner as --runner, not in these options")
  from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415
  options = PipelineOptions(args)
  said = io.StringIO()
  try:
    with contextlib.redirect_stderr(said):     # argparse's usage and error lines
      options.get_all_options(retain_unknown_options=False)
  except SystemExit:
    error = (said.getvalue().strip().splitlines() or ["refused"])[-1].partition("error: ")
    raise ValueError(f"--beam_pipeline_options={pipeline_options!r}: "
                     f"{error[2] or error[0]}") from None
  if runner == "DirectRunner":
    if _worker_processes(options):
      from apache_beam.runners.portability.fn_api_runner import fn_runner  # noqa: PLC0415
      return fn_runner.FnApiRunner(), options
    from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner  # noqa: PLC0415
    return BundleBasedDirectRunner(), options
  return runner, options


def _worker_processes(options):
  """Whether the direct runner was asked for worker processes
  (--direct_running_mode=multi_processing)."""
  from apache_beam.options.pipeline_options import DirectOptions  # noqa: PLC0415
  return options.view_as(DirectOptions).direct_running_mode == "multi_processing"


class WriteShard(beam.DoFn if beam is not None else object):
  """Writes the shard of each element (a writer.Shard) unless it is complete already; emits
  its index."""

  def __init__(self, plan):
    super().__init__()
    self.plan = plan

  def process(self, shard):
    plan = self.plan
    state = rerun.shard_state(plan.params, plan.output_dir, plan.split, shard, plan.sp_sha,
                              plan.seed)
    if state != "done":
      writer.write_shard(plan.job(shard))
    yield shard.index


def _write_manifest(indices, plan):
  """The pipeline's last step: the manifest, once every planned shard is complete."""
  done = {s.index for s in plan.shards} - {s.index for s in plan.todo} | set(indices)
  result = manifest.write_when_complete(plan, done, progress=log.info)
  return None if result is None else result["counts"]


def run(plan, runner, options, shards):
  """Runs the pipeline writing SHARDS (writer.Shard elements; duplicates are harmless) and then
  the manifest of PLAN's record set; returns when the job has finished."""
  with beam.Pipeline(runner=runner, options=options) as pipeline:
    _ = (pipeline
         | "Shards" >> beam.Create(list(shards))
         | "Spread" >> beam.Reshuffle()
         | "WriteShard" >> beam.ParDo(WriteShard(plan))
         | "AllShards" >> beam.combiners.ToList()
         | "Manifest" >> beam.Map(_write_manifest, plan))


def remove_leftovers(plan):
  """Temporaries of the planned shards and of the manifest that attempts which died left."""
  names = [n for s in plan.shards for n in (plan.params.record_name(plan.split, s.index),
                                             plan.params.info_name(plan.split, s.index))]
  return writer.remove_temporaries(plan.output_dir,
                                   names + [manifest.manifest_name(plan.params, plan.split)])


def create(input_glob, sp_model, output_dir, params, runner="DirectRunner", pipeline_options="",
           split="train", seed=0, num_workers=1, shard_bytes=32 << 20, progress=print,
           shards_to_run=None):
  """writer.create on a Beam runner: the same checks (one-line FileNotFoundError / ValueError
  before any work), shards, bytes and manifest. NUM_WORKERS: threads of the launcher's check of
  the shards already there. SHARDS_TO_RUN (tests): the elements sent to the pipeline, given the
  Plan (default: the shards still to write). Returns a summary dict like writer.create's."""
  import time  # noqa: PLC0415
  beam_runner, options = check(runner, pipeline_options)
  urls = [p for p in (input_glob, sp_model, output_dir) if str(p).startswith("ram://")]
  if urls and (runner != "DirectRunner" or _worker_processes(options)):
    raise ValueError(f"{urls[0]}: ram:// lives in this process's memory; its workers cannot see "
                     "it (use --runner=DirectRunner without --direct_running_mode)")
  plan = writer.prepare(input_glob, sp_model, output_dir, params, split, seed,
                        num_workers=num_workers, shard_bytes=shard_bytes, progress=progress)
  todo = plan.todo
  progress(f"{len(plan.paths)} files, {len(plan.shards)} shards; "
           f"{len(plan.shards) - len(todo)} already complete, {len(todo)} to write"
           + (f" ({plan.outdated} made from other inputs or settings)" if plan.outdated else "")
           + (f", {len(plan.stale)} stale file(s) of shards no longer planned removed"
              if plan.stale else "")
           + f" on {runner} -> {output_dir}")
  start = time.time()
  elements = shards_to_run(plan) if shards_to_run else todo
  if elements:
    run(plan, beam_runner, options, elements)
  else:
    manifest.write_when_complete(plan, {s.index for s in plan.shards}, num_workers, progress)
  remove_leftovers(plan)
  seconds = time.time() - start
  written = manifest.read(output_dir, plan.params, split)   # (there: every shard is complete)
  mine = [json.loads(fileio.read_bytes_light(fileio.join(
      output_dir, plan.params.info_name(split, s.index)))) for s in todo]
  summary = {"shards": sum(1 for i in mine if i["num_batch"]),
             "skipped_shards": sum(1 for i in mine if not i["num_batch"]),
             "records": sum(i["num_records"] for i in mine),
             "tokens": sum(i["tokens"] for i in mine),
             "bad_lines": sum(i["bad_lines"] for i in mine), "seconds": seconds,
             "params": plan.params, "empty_files": len(plan.empty),
             "total_shards": len(plan.shards), "already_complete": len(plan.shards) - len(todo),
             "outdated": plan.outdated, "removed": len(plan.stale), "counts": written["counts"]}
  progress(f"manifest: {manifest.manifest_path(output_dir, plan.params, split)} "
           f"({written['counts']['shards']} shards, {written['counts']['records']:,} records)")
  return summary
