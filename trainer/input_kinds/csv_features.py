"""CSV shards of float features and an integer label (input_fns/csv_records.py)."""
import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns import csv_records
from trainer.input_kinds import base, registry


class CsvFeatures(base.RecordFileKind):
    name = 'csv_features'
    records = csv_records
    reader = tf.data.TextLineDataset

    def record_shape(self, spec):
        return spec.num_features

    def train_input_fn(self, spec, file_pattern, flag_name, batch_size, seed, options):
        for name in ('augment', 'augment_flip'):
            if getattr(options, name):
                raise UserError(f'--{name}: {spec.name} reads CSV rows, which have no '
                                f'augmentation; leave --{name} off')
        return super().train_input_fn(spec, file_pattern, flag_name, batch_size, seed, options)

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
