"""Data preparation (files -> TFRecord shards) and tf.data input_fns that read them, in
packages by kind of data over one record core: records <- tables <- images <- faces <- prepare
(each imports only those to its left, common and features; docs/architecture.md).

This package knows nothing of models: it yields feature dicts and labels.
"""

from common import store_settings

store_settings.apply_defaults()  # before TensorFlow is imported: its GCS client reads them then
