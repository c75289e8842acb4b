"""modeling/families.py: the registry keyed by --model_type builds each family's task models
and reads its config; an unknown family is a one-line error naming the flag."""

import json

import pytest

from modeling import families
from modeling.xlnet import models
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import models as mpnet_models
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig


def test_unknown_family_names_the_flag_and_the_choices():
  with pytest.raises(ValueError, match=r"^--model_type=bert: expected one of xlnet, mpnet$"):
    families.get("bert")


def test_each_family_builds_its_own_task_models(tmp_path):
  xlnet_config = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=40)
  mpnet_config = mpnet.MPNetConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=40)
  run = RunConfig(dropout=0.0, dropatt=0.0)
  want = {"xlnet": (xlnet_config, models.XLNetClassifier, models.XLNetRaceModel,
                    models.XLNetSquadModel),
          "mpnet": (mpnet_config, mpnet_models.MPNetClassifier, mpnet_models.MPNetRaceModel,
                    mpnet_models.MPNetSquadModel)}
  for name, (config, classifier, race, squad) in want.items():
    family = families.get(name)
    built = family.classifier(config, run, 3, "mnli", False, "last", True)
    assert type(built) is classifier and built.n_class == 3
    assert type(family.race_model(config, run, "last", True)) is race
    model = family.squad_model(config, run, 2, 3)
    assert type(model) is squad and (model.start_n_top, model.end_n_top) == (2, 3)
  (tmp_path / "x.json").write_text(xlnet_config.to_json())
  assert families.get("xlnet").config_from_json(str(tmp_path / "x.json")) == xlnet_config
  (tmp_path / "m.json").write_text(json.dumps({"vocab_size": 40, "hidden_size": 16,
                                               "num_attention_heads": 2}))
  assert families.get("mpnet").config_from_json(str(tmp_path / "m.json")).hidden_size == 16
