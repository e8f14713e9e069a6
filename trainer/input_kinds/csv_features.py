"""CSV shards of float features and an integer label (input_fns/tables/csv_records.py)."""
import numpy as np
import tensorflow as tf

from input_fns.tables import csv_records
from trainer.input_kinds import base, registry


class CsvFeatures(base.WithoutAugmentation, base.RecordFileKind):
    records_are = 'CSV rows'
    name = 'csv_features'
    records = csv_records

    def reader(self, files):
        return tf.data.TextLineDataset

    def record_shape(self, spec):
        return spec.num_features

    def serving_receiver_fn(self, spec, options):
        """serving_default takes 'inputs', float32 [N, num_features]: the columns before the label."""
        def receiver_fn():
            inputs = tf.compat.v1.placeholder(tf.float32, [None, spec.num_features],
                                              name=csv_records.FEATURE_KEY)
            return tf.estimator.export.ServingInputReceiver({csv_records.FEATURE_KEY: inputs},
                                                            {csv_records.FEATURE_KEY: inputs})

        return receiver_fn

    def warmup_inputs(self, spec, options):
        return {csv_records.FEATURE_KEY: np.zeros([1, spec.num_features], np.float32)}


KIND = registry.register(CsvFeatures())
