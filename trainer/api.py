"""The stable surface for your own models and input kinds: import from here only.

A --usr_dir folder's modules (docs/your-model.md) register models and input kinds with the
names below; everything else in the service may move between releases, these stay. The
built-in models are their first users: they use exactly these (tests/test_usr_dir.py checks).

Models:
  ModelSpec(name, model_fn, default_params, input_kind, image_shape=(), num_features=0,
            schema_kind=None, single_process=False, keras_model=None, head=None)
                                 schema_kind: built from a prepared data set's schema;
                                 single_process: training refuses distribution;
                                 keras_model(params, inputs) -> an uncompiled tf.keras.Model
                                 of the logits, with model_fn=None: the service makes the
                                 model_fn, with `head` ('classification', 'binary', 'table';
                                 default: the input kind's) (models/keras_model.py)
  register_model(spec)           makes spec.name a --model choice, each param a flag
  TRAINING_PARAMS                the params train_op reads (optimizer, learning rate and its
                                 schedule, warm-up, label smoothing, weight averaging and
                                 decay), with their usual values: a model's DEFAULT_PARAMS start
                                 from them
  CLASS_WEIGHT_PARAMS            --class_weights, for a model whose loss is one of the heads
                                 below (classification or table): they weigh it by class
  train_op(loss, params, batch_accuracy=None, update_ops=())
                                 optimizer and learning-rate schedule from params, loss
                                 scaling under --precision=mixed_float16; the variables made
                                 before it are the model's, those --warm_start_from fills
  softmax_losses(labels, logits, smoothing), sigmoid_losses(...), label_smoothing(params, mode)
                                 per-example losses with params' label smoothing (training only)
  float32(tensor)                logits and losses stay float32 under mixed precision
  estimator_loss(per_example_losses, mode)
                                 the loss an EstimatorSpec takes (evaluation weighs every
                                 example once, whatever --batch_size)
  scalar_summary(tag, value)     a training summary under exactly that tag
  classification_estimator_spec(logits, labels, mode, params, images=None, class_names=None,
                                update_ops=(), regularization_losses=())
                                 the N-class head: loss, accuracy, evaluation pictures,
                                 serving_default and classify signatures; each head adds
                                 regularization_losses (a Keras model's `losses`) to
                                 training's loss
  binary_estimator_spec(logits, labels, mode, params, ...)
                                 the one-logit head: loss, accuracy, AUC, PR curve
  embedding_pair_spec(...)       the one-logit head of a pair model that embeds each input
  most_confident_mistakes, confusion_matrix, pr_curve, face_pairs_fn
                                 evaluation pictures, as eval_metric_ops
  accuracy_of_each_class(labels, classes, class_names)
                                 eval_metric_ops: 'accuracy_of_class/NAME' for each class
Over a table (input_kind='table', schema_kind='table': params['schema'] is the manifest's;
features: [batch] each, a fixed-length list [batch, N], one of any length a SparseTensor):
  table_feature_columns(schema, embedding_dimension=8)
                                 the features as the deep canned models read them
  table_logits_dimension(schema) 1 for a binary or regression label, else the classes
  table_estimator_spec(features, labels, mode, logits, params, update_ops=(),
                       regularization_losses=())
                                 the canned models' head: their metrics, pictures and signatures
Input kinds (what feeds a model: input_fns, serving receiver, signature names):
  InputKind                      the base class; InputOptions, what input flags it gets
  TFRecordKind                   TFRecord files of your own format: give parse_batch,
                                 serving_receiver_fn and warmup_inputs
  register_input_kind(kind)      makes kind.name a ModelSpec.input_kind
  list_record_files(pattern, flag_name)
  decode_batch, synthetic_png    serving encoded images; a stand-in image for warm-up
"""
from input_fns.records.pipeline import list_record_files
from models.heads import binary_estimator_spec, embedding_pair_spec
from models.class_weights import PARAMS as CLASS_WEIGHT_PARAMS
from models.heads import classification_estimator_spec
from models.eval_pictures import (accuracy_of_each_class, confusion_matrix, face_pairs_fn,
                                  most_confident_mistakes, pr_curve)
from models.precision import float32
from models.registry import ModelSpec
from models.registry import register as register_model
from models.heads import table_estimator_spec, table_feature_columns, table_logits_dimension
from models.training import (TRAINING_PARAMS, estimator_loss, label_smoothing, scalar_summary,
                             sigmoid_losses, softmax_losses, train_op)
from trainer.input_kinds.base import (InputKind, InputOptions, TFRecordKind, decode_batch,
                                      synthetic_png)
from trainer.input_kinds.registry import register as register_input_kind

__all__ = [
    'ModelSpec', 'register_model', 'TRAINING_PARAMS', 'CLASS_WEIGHT_PARAMS', 'train_op',
    'float32', 'estimator_loss', 'softmax_losses', 'sigmoid_losses', 'label_smoothing',
    'scalar_summary', 'classification_estimator_spec', 'binary_estimator_spec',
    'embedding_pair_spec', 'most_confident_mistakes', 'confusion_matrix', 'pr_curve',
    'face_pairs_fn', 'accuracy_of_each_class',
    'table_feature_columns', 'table_logits_dimension', 'table_estimator_spec',
    'InputKind', 'InputOptions', 'TFRecordKind', 'register_input_kind', 'list_record_files',
    'decode_batch', 'synthetic_png',
]
