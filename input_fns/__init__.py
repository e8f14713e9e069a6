"""Data preparation (files -> TFRecord shards) and tf.data input_fns that read them.

This package knows nothing of models: it yields feature dicts and labels.
"""
