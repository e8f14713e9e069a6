"""Export policies from the ledger (best, latest), the exports kept and the version TF Serving
is told to serve, without training."""
import os

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from helpers import evaluated, write_fake_checkpoints
from trainer.evaluation import export_policy
from trainer.evaluation.export_policy import LedgerExports
from trainer.model_dir.metric_goal import MetricGoal
from trainer.serving import model_config


def fake_exports(tmp_path, policy, keep, saved_past_name=0):
    """A policy whose export function records the call and writes the folder as the real one does:
    named by the global step inside the checkpoint, which on a cluster is past the one in its name."""
    export_dir = tmp_path / 'exports'
    made = []

    def export(checkpoint):
        step = int(checkpoint.rsplit('-', 1)[1]) + saved_past_name
        (export_dir / str(step)).mkdir(parents=True)
        (export_dir / str(step) / 'export_complete.json').write_text('{}')
        made.append(step)
        return str(export_dir / str(step))

    exports = LedgerExports(str(export_dir), policy, MetricGoal('loss', 'min'), keep, export,
                            'mnist_cnn')
    return exports, export_dir, made


def ledger_entry(tmp_path, step, loss, saved_past_name=0):
    return evaluated(step, str(tmp_path / f'model.ckpt-{step}'), loss=loss,
                     global_step=step + saved_past_name)


def test_best_policy_exports_only_improvements_and_keeps_the_newest(tmp_path):
    # As on a cluster: model.ckpt-N holds global step N+2, and Estimator.evaluate reports N+2.
    write_fake_checkpoints(tmp_path, [0, 1, 2, 3, 4], newest_saved=4)
    exports, export_dir, made = fake_exports(tmp_path, 'best', keep=2, saved_past_name=2)
    entries = []
    for step, loss in [(0, 2.0), (1, 1.0), (2, 1.5), (3, 0.5), (4, 0.7)]:
        entries.append(ledger_entry(tmp_path, step, loss, saved_past_name=2))
        exports.update(entries)
    assert made == [2, 3, 5]
    assert sorted(os.listdir(export_dir)) == ['3', '5', 'best', 'models.config']
    assert (export_dir / 'best').read_text() == '5\n'
    assert model_config.pinned_version(str(export_dir)) == 5
    assert export_policy.listed_exports(str(export_dir))['served'] == 5  # as status shows it
    # A new process (restart) with the same ledger exports nothing more.
    again, _, made_again = fake_exports(tmp_path, 'best', keep=2, saved_past_name=2)
    again.update(entries)
    assert made_again == []


def test_the_version_tf_serving_was_told_to_serve_stays_until_the_next_best(tmp_path):
    """TF Serving reads models.config again only every poll: the version it pinned before
    must outlive the rewrite, even with --exports_to_keep=1."""
    write_fake_checkpoints(tmp_path, [0, 1, 2], newest_saved=2)
    exports, export_dir, made = fake_exports(tmp_path, 'best', keep=1)
    entries = []
    for step, loss, listed in [(0, 2.0, ['0']), (1, 1.0, ['0', '1']), (2, 0.5, ['1', '2'])]:
        entries.append(ledger_entry(tmp_path, step, loss))
        exports.update(entries)
        assert sorted(os.listdir(export_dir)) == listed + ['best', 'models.config']
        assert model_config.pinned_version(str(export_dir)) == step
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse((export_dir / 'models.config').read_text(), config)
    [model] = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == (
        'mnist_cnn', str(export_dir), 'tensorflow')
    assert list(model.model_version_policy.specific.versions) == [2]


def test_latest_policy_follows_the_newest_evaluation(tmp_path):
    write_fake_checkpoints(tmp_path, [0, 1], newest_saved=1)
    exports, export_dir, made = fake_exports(tmp_path, 'latest', keep=0)
    exports.update([ledger_entry(tmp_path, 0, 1.0), ledger_entry(tmp_path, 1, 9.0)])
    assert made == [1] and (export_dir / 'latest').read_text() == '1\n'
