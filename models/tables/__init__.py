"""The models over a table's schema: tf.estimator's canned models (canned.py), gradient boosted
trees (boosted_trees.py, their trees tree_ensemble.py), the feature columns and head the schema
makes (table_columns.py) and what the service adds to that head (canned_head.py).
Imports common, features and models' shared pieces; never models.heads (which imports this).
"""
