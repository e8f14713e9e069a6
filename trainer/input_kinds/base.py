"""What every input kind provides, and the input options all kinds share."""
import abc
import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from common.errors import UserError
from input_fns.records import listed_files, pipeline

Stages = List[Tuple[str, Callable[[], tf.data.Dataset]]]


@dataclasses.dataclass(frozen=True)
class InputOptions:
    """How input_fns read: the trainer's input flags, whose defaults are these."""
    shuffle_buffer: int = pipeline.DEFAULT_SHUFFLE_BUFFER  # records in the training shuffle buffer
    pair_sampler: str = 'graph'  # face pairs, training: 'graph' (inside tf.data) or 'generator'
    same_fraction: float = 0.5  # face pairs, training: share of same-person pairs
    self_pair_fraction: float = 0.0  # face pairs, training: one-photo people in same pairs too
    face_crop_fraction: float = 0.5  # face pairs: side of the central crop / the shorter side
    face_image_size: int = 0  # face pairs: the crop resized to this square; 0: the model's own
    augment: bool = False  # training only: random shifts, rotations, scaling (faces: crops, flips...)
    augment_flip: bool = False  # image classification, training only: random left-right mirroring
    # Image classification, with augment: its ranges of rotation, scale and shift times this...
    augment_strength: float = 1.0
    augment_shear: float = 0.0  # ...and a horizontal shear of up to this many degrees
    augment_elastic: float = 0.0  # ...and an elastic distortion of this RMS length in pixels


# The input flags that tune image classification's --augment (and need it).
AUGMENT_TUNING = ('augment_strength', 'augment_shear', 'augment_elastic')


@dataclasses.dataclass(frozen=True)
class Decision:
    """What an export bakes in besides the checkpoint: params the model is built with, and the
    record of where they came from (written beside the model)."""
    model_param_overrides: Dict
    record: Dict


class InputKind(abc.ABC):
    """One family of input: its input_fns, benchmark stages, serving receivers and extra metrics.

    spec is the model's registry.ModelSpec (image_shape, num_features...).
    """
    name = ''
    # Export: signatures Estimator makes from the receivers' alternatives ('<receiver>:<output>'),
    # renamed ({old: new}) or dropped ({old: None}).
    signature_renames: Dict[str, Optional[str]] = {}
    last_stage_name = 'the input_fn'
    # The scalar metrics extra_metrics adds, as the ledger flattens them (tuner_metrics).
    extra_metric_names: Tuple[str, ...] = ()
    # InputOptions only this kind reads: given to a model of another kind, each is refused
    # (registry.check_options) rather than silently ignored.
    own_options: Tuple[str, ...] = ()
    records_are = 'records'  # what the kind reads, for messages

    @abc.abstractmethod
    def train_input_fn(self, spec, file_pattern: str, flag_name: str, batch_size: int, seed: int,
                       options: InputOptions) -> Callable:
        ...

    @abc.abstractmethod
    def eval_input_fn(self, spec, file_pattern: str, flag_name: str, batch_size: int,
                      options: InputOptions) -> Callable:
        """One deterministic pass that sees every example once."""
        ...

    def earlier_stages(self, spec, file_pattern: str, flag_name: str, batch_size: int, seed: int,
                       options: InputOptions) -> Stages:
        """The training pipeline cut short after each stage before the last (for benchmarks)."""
        return []

    @abc.abstractmethod
    def serving_receiver_fn(self, spec, options: InputOptions) -> Callable:
        ...

    @abc.abstractmethod
    def warmup_inputs(self, spec, options: InputOptions) -> Dict[str, np.ndarray]:
        """A synthetic batch for each input name of the export's signatures (TF Serving's
        warm-up requests: trainer/serving/warmup.py)."""
        ...

    def serving_decision(self, model_dir: str, step: int, eval_name: str) -> Optional[Decision]:
        """A decision an eval job chose for the checkpoint of `step`, for the export to bake
        in; None when the kind makes none."""
        return None

    def serving_reading(self, spec) -> Optional[Dict]:
        """How the training rows were read, kept with the export for --mode=predict to read
        rows so (trainer/serving/export.py TABLE_READING_FILE); None for a kind without rows."""
        return None

    def extra_metrics(self, estimator, eval_input_fn, eval_files: str,
                      make_eval_input_fn: Callable[[str, str], Callable],
                      threshold_files: Optional[str]) -> Optional[Callable[[str], Dict]]:
        """checkpoint path -> metrics beyond Estimator's own, or None when the kind has none."""
        return None

    def example_schemas(self) -> List[Dict]:
        """Schemas of each shape this kind's data can have, for knowing a model's metrics before
        any data is prepared (trainer/evaluation/reported_metrics.py); [] for a kind without."""
        return []

    def example_label_dtype(self, spec) -> tf.DType:
        """The labels' dtype when a model is built without data (binary heads cast int64)."""
        return tf.int64

    def find_bad_file(self, spec, file_pattern: str):
        """After an error mid-read: (file, what is wrong) for the file it came from, if found."""
        return None

    def training_input_stages(self, spec, file_pattern: str, flag_name: str, batch_size: int,
                              seed: int = 0, options: InputOptions = InputOptions()) -> Stages:
        """[(stage, function returning a dataset)], each stage adding to the one before; the last is
        the training input_fn itself. Checks the files first."""
        input_fn = self.train_input_fn(spec, file_pattern, flag_name, batch_size, seed, options)
        return (self.earlier_stages(spec, file_pattern, flag_name, batch_size, seed, options)
                + [(self.last_stage_name, input_fn)])


class RecordFileKind(InputKind):
    """A kind read by the shared record pipeline (input_fns/records/pipeline.py): one parse per batch.

    records: the input_fns module of its format, with make_input_fn(pattern, shape, ...) and
    parse_batch_fn(shape); record_shape(spec) gives that shape.
    """
    records = None
    last_stage_name = '+ prefetch: the input_fn'
    # Training parses windows of records at once (pipeline.process_record_dataset's windows):
    # for small records whose parse costs less than tf.data's handling of each one.
    parse_in_windows = False

    @abc.abstractmethod
    def record_shape(self, spec):
        ...

    def parse_batch_fn(self, spec) -> Callable:
        return self.records.parse_batch_fn(self.record_shape(spec))

    def reader(self, files: List[str]) -> Callable:
        """files -> their records: TFRecordDataset, GZIP where their manifest says so."""
        return listed_files.record_reader(files)

    def format_options(self, training: bool, options: InputOptions) -> Dict:
        """Keyword arguments of the format's make_input_fn beyond those every format takes."""
        return {}

    def _input_fn(self, spec, file_pattern, flag_name, batch_size, training, seed, options):
        return self.records.make_input_fn(file_pattern, self.record_shape(spec), batch_size,
                                          training, seed=seed, flag_name=flag_name,
                                          shuffle_buffer=options.shuffle_buffer,
                                          **self.format_options(training, options))

    def train_input_fn(self, spec, file_pattern, flag_name, batch_size, seed, options):
        return self._input_fn(spec, file_pattern, flag_name, batch_size, True, seed, options)

    def eval_input_fn(self, spec, file_pattern, flag_name, batch_size, options):
        return self._input_fn(spec, file_pattern, flag_name, batch_size, False, 0, options)

    def find_bad_file(self, spec, file_pattern):
        files = pipeline.list_record_files(file_pattern)
        return pipeline.find_bad_file(files, self.parse_batch_fn(spec), self.reader(files))

    def earlier_stages(self, spec, file_pattern, flag_name, batch_size, seed, options):
        files = pipeline.list_record_files(file_pattern, flag_name)
        reader = self.reader(files)

        def up_to(parse):
            return lambda: pipeline.process_record_dataset(
                files, parse, batch_size, True, seed=seed, reader=reader, prefetch=False,
                shuffle_buffer=options.shuffle_buffer, windows=self.parse_in_windows)

        if self.parse_in_windows:
            return [('read: interleave, windows, shuffle, batch', up_to(None)),
                    ('+ parse the windows', up_to(self.parse_batch_fn(spec)))]
        return [('read: interleave, shuffle, batch', up_to(None)),
                ('+ parse the batch', up_to(self.parse_batch_fn(spec)))]


class TFRecordKind(RecordFileKind):
    """A kind over TFRecord files of one's own record format (tf.Example or any other): a
    subclass gives parse_batch, the serving receiver and the warm-up inputs; reading (shuffled,
    a share per cluster worker, one deterministic pass at evaluation), benchmark stages and
    finding a bad file come from the shared pipeline."""

    @abc.abstractmethod
    def parse_batch(self, spec, serialized) -> Tuple[Dict, tf.Tensor]:
        """[batch] serialized records -> (features, labels) of the batch."""
        ...

    def record_shape(self, spec):
        return None  # the format is parse_batch's own

    def parse_batch_fn(self, spec) -> Callable:
        return lambda serialized: self.parse_batch(spec, serialized)

    def _input_fn(self, spec, file_pattern, flag_name, batch_size, training, seed, options):
        files = pipeline.list_record_files(file_pattern, flag_name)
        return pipeline.record_input_fn(files, self.parse_batch_fn(spec), batch_size, training,
                                        seed=seed, shuffle_buffer=options.shuffle_buffer,
                                        reader=self.reader(files))


class WithoutAugmentation:
    """Mixed into a kind whose records have no augmentation: --augment is refused, naming them."""

    def train_input_fn(self, spec, file_pattern, flag_name, batch_size, seed, options):
        if options.augment:
            raise UserError(f'--augment: {spec.name} reads {self.records_are}, which have no '
                            'augmentation; leave --augment off')
        return super().train_input_fn(spec, file_pattern, flag_name, batch_size, seed, options)


def decode_batch(encoded, decode_one, shape):
    """Serving: a batch of encoded images, each decoded by decode_one, as float32 [N, *shape].

    An empty batch is refused by name: the model's convolutions would fail on it obscurely.
    """
    name = encoded.op.name
    not_empty = tf.debugging.assert_positive(
        tf.size(encoded), message=f'{name} is empty: send at least one image')
    with tf.control_dependencies([not_empty]):
        decoded = tf.map_fn(decode_one, encoded, fn_output_signature=tf.float32)
    return tf.reshape(decoded, [-1] + list(shape))


def synthetic_png(height: int, width: int, channels: int) -> bytes:
    """A grey ramp of the given size, PNG-encoded: a stand-in image for warm-up requests."""
    ramp = np.linspace(0, 255, height * width * channels).reshape([height, width, channels])
    return tf.io.encode_png(ramp.astype(np.uint8)).numpy()
