"""The record machinery every kind of data shares: TFRecord shards written atomically and the
manifest.json that vouches for them, the train/validation split by key, what a file pattern
names and a folder's listing, the shared tf.data pipeline, and worker pools for plain-Python
preprocessing. It knows no kind of data. Imports only common.
"""
