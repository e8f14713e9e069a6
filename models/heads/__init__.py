"""The heads: what every model shares after its logits, one family of three members.

classification (N classes: softmax), binary (one logit: logistic) and table (tf.estimator's
canned head made from a table's schema). Each gives the loss (with label smoothing and class
weights where they apply), the evaluation metrics and pictures, the serving outputs and the
training spec, which all three take from models/training.py. A model_fn ends in one of them.
Imports common, features, models' shared pieces (training, precision, class_weights,
eval_pictures) and models.tables (the canned head); no model module.
"""
from models.heads.binary import SAME_PERSON_THRESHOLD, binary_estimator_spec, embedding_pair_spec
from models.heads.classification import classification_estimator_spec
from models.heads.table import table_estimator_spec, table_feature_columns, table_logits_dimension

__all__ = ['SAME_PERSON_THRESHOLD', 'binary_estimator_spec', 'classification_estimator_spec',
           'embedding_pair_spec', 'table_estimator_spec', 'table_feature_columns',
           'table_logits_dimension']
