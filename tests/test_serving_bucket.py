"""A version copied into a bucket never looks loadable before it is whole (issue 27, item 3):
TF Serving loads any version folder that holds saved_model.pb, and knows nothing of
export_complete.json."""
import boto3
import tensorflow as tf

from common import files, paths
from models import registry
from trainer.run import experiment
from trainer.serving import export


def listing(s3_server, bucket, prefix):
    """What another S3 client (TF Serving's poll) sees under prefix now, relative names."""
    client = boto3.client('s3', endpoint_url=s3_server.env['S3_ENDPOINT'],
                          region_name=s3_server.env['AWS_REGION'],
                          aws_access_key_id='testing', aws_secret_access_key='testing')
    pages = client.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix)
    return frozenset(item['Key'][len(prefix):] for page in pages for item in page.get('Contents', []))


def test_saved_model_pb_is_put_last_and_an_older_copy_loses_it_first(
        trained_model, s3_server, s3_bucket, monkeypatch):
    bucket = s3_bucket[len('s3://'):]
    settings = experiment.Settings(mode='export', model_dir=trained_model,
                                   export_dir=f'{s3_bucket}/exports')
    run = experiment.build(settings, registry.get('mnist_cnn'))
    version = 'exports/4/'
    seen = []  # the listing of the version folder after every object written or removed

    def listed_after(operation):
        def wrapped(*args, **kwargs):
            result = operation(*args, **kwargs)
            seen.append(listing(s3_server, bucket, version))
            return result
        return wrapped

    for name in ('copy', 'rename', 'remove'):
        monkeypatch.setattr(tf.io.gfile, name, listed_after(getattr(tf.io.gfile, name)))
    remove_tree = files.remove_tree

    def remove_deepest_first(path):
        """A recursive delete in the worst order for a reader: variables/ before saved_model.pb."""
        if files.isdir(path):
            found = [paths.join(folder, name) for folder, _, names in tf.io.gfile.walk(path)
                     for name in names]
            for file_path in sorted(found, reverse=True):
                tf.io.gfile.remove(file_path)
        remove_tree(path)

    monkeypatch.setattr(files, 'remove_tree', remove_deepest_first)
    for _ in range(2):  # the second time over a complete copy of the same version
        run.export_checkpoint(f'{trained_model}/model.ckpt-4')
        seen.append(listing(s3_server, bucket, version))  # marked complete

    whole = seen[-1]
    assert {export.SAVED_MODEL_PB, export.COMPLETE_MARKER, 'variables/variables.index'} <= whole
    assert any(name.startswith('variables/variables.data-') for name in whole)
    with_pb = [names for names in seen if export.SAVED_MODEL_PB in names]
    assert all(names >= whole - {export.COMPLETE_MARKER} for names in with_pb), (
        'saved_model.pb listed beside an incomplete version')
    # The premise: listings did catch versions part-copied (and the old copy part-removed).
    partial = [names for names in seen if names and not names >= whole - {export.COMPLETE_MARKER}]
    assert len(partial) >= 4
    assert sum(1 for before, after in zip(seen, seen[1:])
               if export.SAVED_MODEL_PB in before and export.SAVED_MODEL_PB not in after) == 1
