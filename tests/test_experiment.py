"""Settings from the flags, and what build() makes from them, in this process (no subprocess)."""
import dataclasses
import json
import os
import re

import pytest

from common.errors import UserError
from helpers import trainer_flags
from models import registry
from trainer.config import flags, settings as settings_module
from trainer.input_kinds.base import InputOptions
from trainer.model_dir import run_files
from trainer.model_dir.metric_goal import MetricGoal
from trainer.observe import hparams
from trainer.run import experiment, hooks


def test_settings_from_flags():
    given = trainer_flags('--model_dir=m', '--train_files=t', '--train_steps=7', '--optimizer=sgd',
                          '--export_metric=accuracy', '--early_stopping_metric=loss',
                          '--early_stopping_mode=max', '--same_fraction=0.3')
    settings = settings_module.Settings.from_flags(given, flags.flagfile_text(given))
    assert settings.final_train_steps == 7 and settings.train_steps == 7
    assert settings.model_param_overrides == {'optimizer': 'sgd'}  # only what was given overrides
    assert settings.export_goal == MetricGoal('accuracy', 'max', '--export_metric')
    assert settings.early_stopping_goal == MetricGoal('loss', 'max', '--early_stopping_metric')
    assert settings.input_options == InputOptions(same_fraction=0.3)
    assert settings.checkpoint == 'latest'
    assert '--train_steps=7\n' in settings.flagfile_text
    assert '--model_dir=m\n' in settings.flagfile_text

    default = settings_module.Settings.from_flags(trainer_flags('--model_dir=m', '--train_files=t'))
    assert default.final_train_steps is None and default.train_steps == 1000
    assert default.export_goal.mode == 'min'  # loss


def test_build_makes_what_the_modes_run(digit_shards, tmp_path):
    settings = settings_module.Settings(
        model_dir=str(tmp_path / 'model'), train_files=digit_shards.train_pattern,
        eval_files=digit_shards.validation_pattern, batch_size=8, train_steps=3,
        keep_checkpoint_max=0, early_stopping_eval_name='validation',
        export_dir=str(tmp_path / 'exports'), model_param_overrides={'learning_rate': 0.5},
        flagfile_text='--model=mnist_cnn\n')
    run = experiment.build(settings, registry.get('mnist_cnn'))
    assert run.estimator.config.model_dir == settings.model_dir
    assert run.estimator.config.keep_checkpoint_max is None  # 0 keeps all
    assert run.estimator.params['learning_rate'] == 0.5
    assert run.estimator.params['optimizer'] == registry.get('mnist_cnn').default_params['optimizer']
    assert run.train_spec.max_steps == 3
    assert [type(hook) for hook in run.train_spec.hooks] == [
        hooks.ProgressHook, hooks.StopOnSignalHook, hparams.HParamsHook, hooks.EarlyStoppingHook]
    assert [type(listener) for listener in run.train_spec.saving_listeners] == [
        hooks.NoEvaluationAfterSignal]
    logged = settings_module.hparam_settings(settings)
    assert logged['batch_size'] == 8 and logged['shuffle_buffer'] == settings.input_options.shuffle_buffer
    features, labels = next(iter(run.train_spec.input_fn()))
    assert features['image'].shape == (8, 28, 28, 1) and labels.shape == (8,)
    job = run.eval_job
    assert job.eval_files == settings.eval_files and job.ledger.eval_name == 'default'
    assert job.exports.goal == settings.export_goal and job.extra_metrics is None

    with run.training():
        with open(os.path.join(settings.model_dir, run_files.FLAGS_FILE)) as f:
            assert f.read() == '--model=mnist_cnn\n'
    with open(os.path.join(settings.model_dir, run_files.TRAIN_FINISHED_FILE)) as f:
        finished = json.load(f)
    assert finished.pop('time')  # when (tells this run's record from an earlier one's)
    # Nothing trained here: short of train_steps with no early stop reads as the model's own end.
    assert finished == {'step': 0, 'train_steps': 3, 'early_stopped': False,
                        'reason': 'the model ended training'}
    other = experiment.build(settings, registry.get('csv_mlp'))
    with pytest.raises(UserError, match=r'was trained as --model=mnist_cnn .*; to train it on, '
                                        r'pass --model=mnist_cnn and its flags again, or '
                                        r'--flagfile=.*/flags.txt and the flags to change'):
        with other.training():
            pass
    face_option = dataclasses.replace(settings, input_options=InputOptions(face_image_size=112))
    with pytest.raises(UserError, match='--face_image_size is for face photos'):
        experiment.build(face_option, registry.get('mnist_cnn'))  # refused, not ignored


def test_eval_files_are_checked_only_when_a_mode_needs_them(tmp_path):
    settings = settings_module.Settings(model_dir=str(tmp_path), eval_files=str(tmp_path / 'none-*'))
    run = experiment.build(settings, registry.get('mnist_cnn'))  # train/export need no eval files
    with pytest.raises(UserError, match='--eval_files: no files match'):
        run.eval_job


def test_evaluate_and_export_see_faces_as_the_model_was_trained_to(tmp_path):
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    (model_dir / run_files.FLAGS_FILE).write_text(
        '--model=face_embedding\n--face_crop_fraction=0.4\n--same_fraction=0.75\n'
        '--face_image_size=112\n')

    def options(mode, *given):
        return settings_module.Settings.from_flags(trainer_flags(
            '--model=face_embedding', f'--mode={mode}', f'--model_dir={model_dir}',
            '--eval_files=e', '--train_files=t', '--export_dir=x', *given)).input_options

    for mode in ('evaluate', 'continuous_eval', 'export'):
        assert options(mode) == InputOptions(face_crop_fraction=0.4,  # training-only ones not
                                             face_image_size=112)
    assert options('evaluate', '--face_crop_fraction=0.45').face_crop_fraction == 0.45
    assert options('export', '--face_image_size=80').face_image_size == 80
    assert options('train') == InputOptions()  # training takes what it is given

    (model_dir / run_files.FLAGS_FILE).write_text('--face_crop_fraction=wide\n')
    with pytest.raises(UserError, match=r'flags.txt: --face_crop_fraction=wide .*give'):
        options('export')


def test_model_params_flag_and_the_trained_ones_in_evaluate(tmp_path):
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    (model_dir / run_files.FLAGS_FILE).write_text(
        '--model=face_embedding\n--model_params=tower_filters=[32,64,128,128,256],'
        'similarity_scale=40\n')

    def params(mode, *given):
        return settings_module.Settings.from_flags(trainer_flags(
            '--model=face_embedding', f'--mode={mode}', f'--model_dir={model_dir}',
            '--eval_files=e', '--train_files=t', '--export_dir=x', *given)).model_param_overrides

    assert params('train', '--model_params=similarity_scale=20', '--learning_rate=0.01') == {
        'similarity_scale': 20.0, 'learning_rate': 0.01}
    trained = {'tower_filters': (32, 64, 128, 128, 256), 'similarity_scale': 40.0}
    for mode in ('evaluate', 'continuous_eval', 'export'):
        assert params(mode) == trained  # built as it was trained
    assert params('evaluate', '--model_params=zoom_views=[1.1,1.2]') == {
        **trained, 'zoom_views': (1.1, 1.2)}  # name by name
    with pytest.raises(UserError, match=r'--learning_rate=0.01 and --model_params '
                                        r'learning_rate=0.1 differ; give learning_rate once'):
        params('train', '--learning_rate=0.01', '--model_params=learning_rate=0.1')

    (model_dir / run_files.FLAGS_FILE).write_text('--model_params=towers=2\n')
    with pytest.raises(UserError, match=r"flags.txt: --model_params: face_embedding has no param 'towers'"):
        params('export')


def test_modes_that_read_a_trained_model_dir_take_its_model_unless_given(tmp_path):
    """evaluate, continuous_eval and export without --model build the model flags.txt names,
    with its params; training, and a --model given, keep the flag."""
    model_dir = tmp_path / 'model'
    model_dir.mkdir()
    (model_dir / run_files.FLAGS_FILE).write_text(
        '--model=face_embedding\n--model_params=similarity_scale=40\n')

    def settings(mode, *given):
        return settings_module.Settings.from_flags(trainer_flags(
            f'--mode={mode}', f'--model_dir={model_dir}', '--eval_files=e', '--train_files=t',
            '--export_dir=x', *given))

    for mode in ('evaluate', 'continuous_eval', 'export'):
        trained = settings(mode)
        assert trained.model == 'face_embedding', mode
        assert trained.model_param_overrides == {'similarity_scale': 40.0}
    assert settings('train').model == 'mnist_cnn'  # the flag's default, refused on this model_dir
    assert settings('export', '--model=face_embedding').model == 'face_embedding'
    with pytest.raises(UserError, match=r'--model=face_siamese: --model_dir=.* was trained as '
                                        r'--model=face_embedding .*; leave --model out'):
        settings('evaluate', '--model=face_siamese')  # before its params, which it has not
    (model_dir / run_files.FLAGS_FILE).write_text('--train_steps=5\n')  # no --model recorded
    assert settings('evaluate').model == 'mnist_cnn'


def test_a_flag_per_model_param_reaches_the_model_and_flags_txt(tmp_path):
    """--dropout_rate, --tower_filters...: what a tuner's trial passes, each param its own flag."""
    model_dir = tmp_path / 'model'

    def settings(mode, *given):
        values = trainer_flags('--model=face_embedding', f'--mode={mode}', f'--model_dir={model_dir}',
                               '--eval_files=e', '--train_files=t', '--export_dir=x', *given)
        return settings_module.Settings.from_flags(values, flags.flagfile_text(values))

    trained = settings('train', '--dropout_rate=0.25', '--tower_filters=32,64', '--noflip_average',
                       '--zoom_views=[1.1,1.3]', '--model_params=similarity_scale=20,dropout_rate=0.25')
    assert trained.model_param_overrides == {
        'dropout_rate': 0.25, 'tower_filters': (32, 64), 'flip_average': False,
        'zoom_views': (1.1, 1.3), 'similarity_scale': 20.0}
    run = experiment.build(trained, registry.get('face_embedding'))
    assert run.estimator.params['tower_filters'] == (32, 64)  # what the model_fn receives
    assert {'--dropout_rate=0.25', '--tower_filters=32,64', '--noflip_average'} <= set(
        trained.flagfile_text.splitlines())
    model_dir.mkdir()
    (model_dir / run_files.FLAGS_FILE).write_text(trained.flagfile_text)
    for mode in ('evaluate', 'export'):  # built as trained, from flags.txt
        assert settings(mode).model_param_overrides == trained.model_param_overrides
    assert settings('evaluate', '--dropout_rate=0.5').model_param_overrides['dropout_rate'] == 0.5


@pytest.mark.parametrize('given, message', [
    (['--dropout_rate=0.3', '--model_params=dropout_rate=0.5'],
     '--dropout_rate=0.3 and --model_params dropout_rate=0.5 differ; give dropout_rate once'),
    (['--embedding_size=64'], '--embedding_size: a param of face_embedding and face_siamese, '
                              'not of mnist_cnn; drop it, or pass --model=face_embedding'),
    (['--dense_units=64', '--model=csv_mlp'], 'a param of mnist_cnn, not of csv_mlp'),
])
def test_model_param_flags_that_disagree_or_belong_elsewhere(given, message):
    with pytest.raises(UserError, match=re.escape(message)):
        settings_module.Settings.from_flags(trainer_flags('--model_dir=m', '--train_files=t', *given))
    assert settings_module.Settings.from_flags(trainer_flags(
        '--model_dir=m', '--train_files=t', '--dropout_rate=0.3', '--model_params=dropout_rate=0.3'
    )).model_param_overrides == {'dropout_rate': 0.3}  # the same value twice is no conflict
