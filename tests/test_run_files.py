"""What the trainer keeps beside the checkpoints: flags.txt and train_finished.json."""
import json
import os
import re

import pytest

from common.errors import UserError
from trainer.model_dir import run_files


def test_record_flags_writes_the_flagfile_and_refuses_another_model(tmp_path):
    model_dir = str(tmp_path / 'model')
    run_files.record_flags(model_dir, 'mnist_cnn', '--model=mnist_cnn\n--train_steps=5\n')
    run_files.record_flags(model_dir, 'mnist_cnn', '--model=mnist_cnn\n--train_steps=9\n')
    with open(os.path.join(model_dir, run_files.FLAGS_FILE)) as f:
        assert f.read() == '--model=mnist_cnn\n--train_steps=9\n'  # resuming rewrites it
    with pytest.raises(UserError, match=f'--model_dir={model_dir} was trained as --model=mnist_cnn'):
        run_files.record_flags(model_dir, 'csv_mlp', '--model=csv_mlp\n')


def test_train_finished_round_trip(tmp_path):
    model_dir = str(tmp_path)
    assert run_files.train_finished(model_dir) is None
    run_files.write_train_finished(model_dir, 100, 'loss has not improved')
    finished = run_files.train_finished(model_dir)
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}', finished.time)
    assert finished == run_files.TrainFinished(step=0, train_steps=100, early_stopped=True,
                                               reason='loss has not improved', time=finished.time)
    with open(os.path.join(model_dir, run_files.TRAIN_FINISHED_FILE)) as f:
        assert run_files.TrainFinished.from_json(json.load(f)) == finished  # what it wrote
    run_files.clear_train_finished(model_dir)
    assert run_files.train_finished(model_dir) is None
    run_files.clear_train_finished(model_dir)  # nothing to clear: no error


def test_unreadable_train_finished_is_a_user_error(tmp_path):
    (tmp_path / run_files.TRAIN_FINISHED_FILE).write_text('{"step": 3}')
    with pytest.raises(UserError, match='train_finished.json: unreadable .*delete it'):
        run_files.train_finished(str(tmp_path))
