"""The training shuffle's buffer as the manifests size it (issue 71): the first batch waits for the
buffer to fill, so a buffer over more records than the shards hold, or (for shards prepare
shuffled on disk) over more shards than the interleave reads at once, only makes the first step
wait for more shards to be read: every one of thousands of small shards on a bucket."""
import json
import shutil

import tensorflow as tf

from helpers import run_prepare
from input_fns.prepare import command as prepare
from input_fns.records import pipeline

CYCLE_SHARDS = 2 * pipeline.TRAIN_PARALLEL_FILES


def csv_shards(folder, num_shards, rows_per_shard):
    run_prepare(prepare.prepare_csv_example, output_dir=str(folder), num_shards=num_shards,
                num_eval_shards=1, rows_per_shard=rows_per_shard, num_features=4)
    return pipeline.list_record_files(f'{folder}/train-*')


def test_buffer_of_shuffled_shards_holds_two_cycles_of_them_at_most(tmp_path):
    many_small = csv_shards(tmp_path / 'small', 100, 3)
    assert pipeline.training_buffer(many_small, 10_000) == CYCLE_SHARDS * 3
    few = csv_shards(tmp_path / 'few', 4, 30)
    assert pipeline.training_buffer(few, 10_000) == 120  # all the records there are
    assert pipeline.training_buffer(few, 50) == 50  # --shuffle_buffer is the most


def test_buffer_of_records_read_in_place_holds_them_all_at_most(tmp_path):
    """Records prepare did not shuffle (read in place) may lie in any order across the shards: the
    buffer is cut only to what they hold."""
    folder = tmp_path / 'in_place'
    csv_shards(folder, 100, 3)
    manifest = json.loads((folder / 'manifest.json').read_text())
    manifest['splits']['train']['read_in_place'] = True
    (folder / 'manifest.json').write_text(json.dumps(manifest))
    assert pipeline.training_buffer(pipeline.list_record_files(f'{folder}/train-*'), 10_000) == 300
    assert pipeline.training_buffer(pipeline.list_record_files(f'{folder}/train-*'), 200) == 200


def test_buffer_of_files_no_manifest_lists_is_the_flags(tmp_path):
    csv_shards(tmp_path / 'listed', 100, 3)
    bare = tmp_path / 'bare'
    shutil.copytree(tmp_path / 'listed', bare, ignore=shutil.ignore_patterns('manifest.json'))
    assert pipeline.training_buffer(pipeline.list_record_files(f'{bare}/train-*'), 10_000) == 10_000


def test_first_batch_of_many_one_row_shards_reads_few_of_them(tmp_path):
    """Before, the 10,000-record buffer over 400 rows was filled across epochs: each shard was
    opened three times (1,200 opens) before the first batch."""
    files = csv_shards(tmp_path / 'tiny', 400, 1)
    opened = []

    def counting_reader(path):
        return tf.data.TextLineDataset(path).map(
            lambda line: tf.py_function(lambda x: opened.append(1) or x, [line], tf.string))

    dataset = pipeline.process_record_dataset(files, None, 8, True, seed=1, reader=counting_reader)
    first = next(iter(pipeline.without_autotuner(dataset)))
    assert first.shape == [8]
    assert len(opened) < 100, f'{len(opened)} shards of 400 read before the first batch'
