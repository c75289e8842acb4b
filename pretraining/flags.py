"""run_pretrain.py's flags beyond the model's and the trainer's: the objective and its
switches, the records' parameters (not given: the records' values; given: checked against
them), checkpoints and record verification. Read by pretraining/runner.py."""

from absl import flags

from data_utils import lanes
from data_utils import record_format
from pretraining import objectives

# Parameters of the records (with reuse_len and bi_data, modeling/flags.py's record defaults).
RECORD_FLAGS = ("seq_len", "reuse_len", "num_predict", "bi_data")
_REC = "default: the records' value (checked against them when given)."


def define_pretrain_flags(flag_values=flags.FLAGS):
  f = dict(flag_values=flag_values)
  flags.DEFINE_enum("objective", "plm", list(objectives.NAMES), "Pretraining objective.", **f)
  flags.DEFINE_enum("mpnet_mode", "mpnet", ["mpnet", "plm", "mlm"], "With --objective=mpnet: "
                    "mpnet, plm (- position compensation) or mlm (- both).", **f)
  flags.DEFINE_bool("mpnet_permute", True, "With --objective=mpnet: False keeps the predictions "
                    "in position order (- permutation).", **f)
  flags.DEFINE_float("nsp_weight", 0.0, "Weight of a next-sentence loss on the stored A/B label "
                     "(0 = off, as XLNet).", **f)
  flags.DEFINE_integer("seq_len", None, "Tokens per example; " + _REC, **f)
  flags.DEFINE_integer("num_predict", None, "Targets per example; " + _REC, **f)
  flags.DEFINE_integer("bsz_per_host", None, "Rows per host and step (the global batch is "
                       "hosts x this); default: the records' lanes. One record set serves many "
                       "layouts: " + lanes.RULE + ".", **f)
  flags.DEFINE_integer("num_core_per_host", None, "Replicas per host (TPU cores or GPUs of one "
                       "host); default: the strategy's (its replicas / hosts).", **f)
  flags.DEFINE_string("eval_record_dir", None, "Held-out records (create_pretrain_data.py "
                      "--output_dir, from text the run does not train on, written with the "
                      "training records' settings; may be --record_dir itself with another "
                      "--split): at every checkpoint the objective's mean held-out losses and "
                      "target accuracy are logged, written to TensorBoard (MODEL_DIR/eval) and "
                      "the checkpoint of the best held-out accuracy kept in MODEL_DIR/best.", **f)
  flags.DEFINE_string("eval_split", "valid", "Split name of the held-out records' files "
                      "(create_pretrain_data.py --split).", **f)
  flags.DEFINE_integer("eval_batches", 100, "Held-out batches (of --bsz_per_host rows, read in "
                       "order, the same every time) per evaluation; fewer if the held-out "
                       "records hold fewer.", **f)
  flags.DEFINE_integer("keep_checkpoints", 5, "Checkpoints kept.", **f)
  flags.DEFINE_bool("checkpoint_memory", True, "Save every replica's Transformer-XL memory in "
                    "the checkpoints, so a resumed run continues exactly. It costs replicas x "
                    "n_layer x lanes per replica x mem_len x d_model floats per checkpoint (and, "
                    "on multi-worker, every host holds all of it when saving): turn it off on "
                    "large pods; a resume then starts from empty memory.", **f)
  flags.DEFINE_integer("num_hosts", None, "Hosts of the job; optional: taken from the strategy "
                       "(its workers or TPU hosts), and checked against it when given.",
                       **f)
  flags.DEFINE_enum("verify_records", "auto", list(record_format.VERIFY_MODES),
                    "Before training, check every record file against its record-info: size "
                    "(always; catches truncation), sha256 (also hash every file: catches any "
                    "altered byte; reads every byte), auto (sha256 when the files total at "
                    f"most {record_format.AUTO_SHA256_BYTES >> 30} GiB). A record corrupted "
                    "beyond these checks stops the run when it is read, naming the file "
                    "(CRC32C).", **f)
