"""tf.Example records of houses: four float features and the price, the label.

Serving takes the four numbers by name (serving_default: TF Serving's predict, "instances"),
or serialized tf.Example protos (the regress signature: TF Serving's regress, "examples").
"""
import numpy as np
import tensorflow as tf

from trainer import api

FEATURES = ('rooms', 'area', 'age', 'distance')  # area: 100 m2; age: decades; distance: 10 km
LABEL = 'price'


def feature_spec(with_label: bool):
    names = FEATURES + ((LABEL,) if with_label else ())
    return {name: tf.io.FixedLenFeature([], tf.float32) for name in names}


def example(values) -> bytes:
    """A serialized tf.Example of {name: float}, as records and regress requests hold them."""
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        for name, value in values.items()})).SerializeToString()


class HouseRecords(api.TFRecordKind):
    name = 'house_records'
    # Estimator names the signatures of the 'example' receiver '<receiver>:<output>': its
    # regress output is the regress signature; its predict output is dropped.
    signature_renames = {'example:regress': 'regress', 'example:serving_default': None}

    def parse_batch(self, spec, serialized):
        parsed = tf.io.parse_example(serialized, feature_spec(with_label=True))
        return {name: parsed[name] for name in FEATURES}, parsed[LABEL]

    def serving_receiver_fn(self, spec, options):
        def receiver_fn():
            examples = tf.compat.v1.placeholder(tf.string, [None], name='examples')
            parsed = tf.io.parse_example(examples, feature_spec(with_label=False))
            # Fed by name, each number cuts off the parsing upstream of it.
            numbers = {name: tf.compat.v1.placeholder_with_default(parsed[name], [None],
                                                                   name=name)
                       for name in FEATURES}
            return tf.estimator.export.ServingInputReceiver(
                numbers, numbers, receiver_tensors_alternatives={'example': {'examples': examples}})

        return receiver_fn

    def warmup_inputs(self, spec, options):
        house = {'rooms': 3.0, 'area': 1.0, 'age': 2.0, 'distance': 1.0}
        return {**{name: np.array([value], np.float32) for name, value in house.items()},
                'inputs': np.array([example(house)], object)}


api.register_input_kind(HouseRecords())
