"""The trainer's flags, in groups as official/utils/flags defines them, over any FlagValues.

define_flags() defines them on absl's FLAGS for `python -m trainer.main`; defaults() reads
their defaults from a private FlagValues, so that Settings repeats none of them.
"""
import functools
import types

from absl import flags

from input_fns.records import pipeline
from models import registry
from trainer.cluster import vertex_env
from trainer.config import flag_checks, modes
from trainer.config.predict_flags import define_predict_and_benchmark
from trainer.input_kinds.base import InputOptions
from trainer.usr_dir import command_line as usr_dir

# Model params that are also training flags of their own, defined in define_training.
TRAINING_FLAGS_THAT_ARE_PARAMS = ('learning_rate', 'learning_rate_decay_steps', 'optimizer')


def _definers(flag_values) -> types.SimpleNamespace:
    """absl's DEFINE_* functions bound to flag_values, each flag this module's wherever its group
    is defined (MODEL_DIR/flags.txt records this module's)."""
    kinds = {'string': flags.DEFINE_string, 'integer': flags.DEFINE_integer,
             'float': flags.DEFINE_float, 'enum': flags.DEFINE_enum, 'bool': flags.DEFINE_bool,
             'multi_string': flags.DEFINE_multi_string}
    return types.SimpleNamespace(**{kind: functools.partial(define, flag_values=flag_values,
                                                            module_name=__name__)
                                    for kind, define in kinds.items()})


def define_flags(flag_values=flags.FLAGS, environment_defaults: bool = True):
    """Every trainer flag and its checks; environment_defaults: Vertex AI's folders stand in
    for --model_dir and the others when not given."""
    for define_group in (define_base, define_training, define_model_params, define_input,
                         define_evaluation, define_export, define_early_stopping,
                         define_predict_and_benchmark, define_device_flags):
        define_group(_definers(flag_values))
    if environment_defaults:
        vertex_env.set_flag_defaults(flag_values)  # AIP_CHECKPOINT_DIR... when --model_dir is not given
    flag_checks.register_checks(flag_values)


@functools.lru_cache(maxsize=None)
def _at_defaults() -> flags.FlagValues:
    """A private FlagValues of the trainer's flags, unparsed: each at its own default."""
    flag_values = flags.FlagValues()
    define_flags(flag_values, environment_defaults=False)
    return flag_values


@functools.lru_cache(maxsize=None)
def defaults() -> types.MappingProxyType:
    """{flag name: default} of the trainer's flags, without the environment's."""
    flag_values = _at_defaults()
    return types.MappingProxyType({name: flag_values[name].default for name in flag_values})


def define_base(d):
    d.string('model', 'mnist_cnn', 'Registered model: ' + ', '.join(registry.names()) + '. '
             'evaluate, continuous_eval and export: default, the one MODEL_DIR/flags.txt names.')
    d.multi_string('usr_dir', [], usr_dir.HELP)
    d.enum('mode', 'train', list(modes.MODES), modes.help_text())
    d.string('model_dir', None, 'Checkpoints, summaries and the flags used.')
    d.string('train_files', None, 'Glob (or comma-separated globs) of training shards; '
             'write a comma inside a path as \\,.')
    d.string('eval_files', None, 'Glob (or comma-separated globs) of evaluation shards; '
             'write a comma inside a path as \\,.')
    d.integer('batch_size', 100, 'Examples per training and evaluation batch.', lower_bound=1)
    d.string('model_params', None, 'Any of the model\'s params, as name=value,'
             'name=[a,b] (for example similarity_scale=40,zoom_views=[1.1,1.2]); '
             'evaluate, continuous_eval and export take the trained ones from '
             'MODEL_DIR/flags.txt. The models\' params: their DEFAULT_PARAMS.')
    d.integer('random_seed', 0, 'Seed for weights and the data order.')


def define_training(d):
    d.integer('train_steps', 1000, 'Train until the global step reaches this.', lower_bound=1)
    d.float('learning_rate', None, 'Learning rate; default: the model\'s own.', lower_bound=0.0)
    d.integer('learning_rate_decay_steps', None, 'Decay the learning rate 10x every this many '
              'steps (exponentially); default: the model\'s own (constant).', lower_bound=0)
    d.string('optimizer', None, f'{flag_checks.OPTIMIZER_NAMES}; default: the model\'s own.')
    d.string('warm_start_from', None, 'train, train_and_evaluate: a trained model_dir (its '
             'latest checkpoint), a checkpoint path (MODEL_DIR/model.ckpt-N) or an export '
             '(EXPORT_DIR/STEP, EXPORT_DIR/best) whose values start the model\'s variables, '
             'only while --model_dir has no checkpoint of its own (a resumed run goes on from '
             'its own). A variable it lacks starts afresh.')
    d.string('warm_start_vars', '.*', 'With --warm_start_from: the model\'s variables it '
             'fills, a regular expression matched at the start of each name (weights and '
             'batch-norm statistics; never the global step or the optimizer\'s slots). '
             '\'^(?!logits/)\' leaves a layer named logits (of a functional Keras model) to '
             'start afresh: a head for other classes.')
    d.integer('save_checkpoints_steps', 500, 'Save a checkpoint every N steps.', lower_bound=1)
    d.integer('keep_checkpoint_max', 5, 'Checkpoints to keep (0 keeps all).', lower_bound=0)
    d.integer('log_every_n_steps', 100, 'Log progress and write summaries every N steps.',
              lower_bound=1)
    d.integer('lease_timeout_secs', 120, 'A bucket model_dir\'s training lease, or an eval '
              'job\'s claim on a checkpoint, that has not been renewed for this long is stale: '
              'the next trainer or eval job takes it over (the holder renews it every quarter '
              'of this).', lower_bound=1)


def define_model_params(d):
    """A flag per model param (--dropout_rate, --tower_filters...), as a tuner passes each one;
    the training group already defines --learning_rate, --optimizer and their kin. Default None:
    the model's own value (Settings.model_param_overrides reads them with --model_params)."""
    for name, models in sorted(registry.param_owners().items()):
        if name in TRAINING_FLAGS_THAT_ARE_PARAMS:
            continue
        default = registry.get(models[0]).default_params[name]
        defaults = ', '.join(f'{model} {registry.get(model).default_params[name]!r}'
                             for model in models)
        help_text = f'Model param (default: {defaults}); like --model_params={name}=VALUE.'
        if isinstance(default, bool):
            d.bool(name, None, help_text)
        elif isinstance(default, (int, float)):
            (d.integer if isinstance(default, int) else d.float)(name, None, help_text)
        else:  # text, and lists written [a,b]
            d.string(name, None, help_text)


def define_input(d):
    d.integer('shuffle_buffer', InputOptions.shuffle_buffer,
              'Records in the training shuffle buffer (tables: a shuffled window), at most: no '
              'more than the files hold, nor (shards prepare shuffled) than '
              f'{pipeline.SHUFFLED_SHARDS_BUFFERED} shards hold.',
              lower_bound=1)
    d.enum('pair_sampler', InputOptions.pair_sampler, ('graph', 'generator'), 'Face pairs, '
           'training: draw pairs inside tf.data (graph), or with the naive Python generator.')
    d.float('same_fraction', InputOptions.same_fraction,
            'Face pairs, training: share of same-person pairs.', lower_bound=0.0, upper_bound=1.0)
    d.float('self_pair_fraction', InputOptions.self_pair_fraction, 'Face pairs, training: share '
            'of the people with one photo who give same-person pairs too, that photo against '
            'itself, each side augmented apart (--augment); 0: only people with two or more '
            'photos.', lower_bound=0.0, upper_bound=1.0)
    d.bool('augment', InputOptions.augment, 'Training only: random shifts, rotations '
           'and scaling of digits; random crops, flips, brightness, contrast and '
           'rotations of faces. Never applied to evaluation or serving.')
    d.bool('augment_flip', InputOptions.augment_flip, 'Image classification, training only: '
           'mirror images left-right at random (with or without --augment). Give it only where a '
           'mirrored image is still of its class (photos of animals, not digits or text).')
    d.float('augment_strength', InputOptions.augment_strength, 'Image classification, with '
            '--augment: its ranges of rotation (10°), scale and shift (10%) times this.',
            lower_bound=0.0, upper_bound=3.0)
    d.float('augment_shear', InputOptions.augment_shear, 'Image classification, with --augment: '
            'slant each image by a horizontal shear of up to this many degrees.',
            lower_bound=0.0, upper_bound=45.0)
    d.float('augment_elastic', InputOptions.augment_elastic, 'Image classification, with '
            '--augment: elastic distortion, each pixel moved along a smooth random field (sigma '
            '1/7 of the height) whose RMS length is this many pixels (1-1.5 for digits).',
            lower_bound=0.0, upper_bound=10.0)
    d.float('face_crop_fraction', InputOptions.face_crop_fraction,
            'Face pairs: side of the central square crop, as a fraction of the '
            'photo\'s shorter side. evaluate, continuous_eval and export: default, the '
            'one the model was trained with (MODEL_DIR/flags.txt).',
            lower_bound=0.05, upper_bound=1.0)
    d.integer('face_image_size', InputOptions.face_image_size,
              'Face pairs: the side in pixels the crop is resized to (more detail, more time a '
              'step); 0: the model\'s own (face_embedding 96, face_siamese and face_diff 64). '
              'evaluate, continuous_eval and export: default, the one the model was trained with.',
              lower_bound=0, upper_bound=1024)


def define_evaluation(d):
    d.integer('eval_throttle_secs', 60, 'train_and_evaluate: at least this many seconds '
              'between evaluations.', lower_bound=0)
    d.string('threshold_files', None, 'Face pairs, evaluate: pair shards of training '
             'people on which the decision threshold is chosen (LFW protocol); not '
             'needed when --eval_files hold the 10 folds of pairs.txt.')
    d.string('checkpoint', None, 'evaluate: latest, all, a global step or a checkpoint '
             'path; export: latest, a step or a path. Default: latest.')
    d.string('eval_name', 'default', 'evaluate/continuous_eval: results go to '
             'MODEL_DIR/eval_NAME/ (TensorBoard) and its ledger, results/step-N.json.')
    d.integer('eval_timeout_secs', 3600, 'continuous_eval: stop after this many seconds '
              'without a new checkpoint.', lower_bound=1)
    d.integer('wait_for_eval_secs', 0, 'train, train_and_evaluate (the chief): once '
              'training ends, wait up to this long for the eval job --eval_name to record '
              'the final checkpoint in its ledger (a TFJob ends, and deletes its evaluator, '
              'when the chief exits). 0: do not wait.', lower_bound=0)
    d.string('hypertune_metric', None, 'In a Vertex AI tuning trial (CLOUD_ML_TRIAL_ID set): '
             'the metric each evaluation reports through cloudml-hypertune; default: all.')


def define_export(d):
    d.string('export_dir', None, 'export: SavedModels go to EXPORT_DIR/<global step>/; '
             'evaluate/continuous_eval: also export there as --export_policy says.')
    d.enum('export_policy', 'best', ('best', 'latest'), 'evaluate/continuous_eval with '
           '--export_dir: export the best checkpoint in the ledger, or the latest.')
    d.string('export_metric', 'loss', 'The metric that picks the best export.')
    d.enum('export_mode', None, ('max', 'min'), 'Whether a larger --export_metric is '
           'better; default: min for metrics named *loss* or *error*, else max.')
    d.integer('exports_to_keep', 5, 'Keep only the newest N exports (0 keeps all).',
              lower_bound=0)


def define_early_stopping(d):
    d.string('early_stopping_eval_name', None, 'train: stop when the ledger of this '
             'eval job shows no improvement for --early_stopping_patience evaluations.')
    d.string('early_stopping_metric', 'loss', 'The metric early stopping watches.')
    d.enum('early_stopping_mode', None, ('max', 'min'), 'Like --export_mode, for '
           '--early_stopping_metric.')
    d.integer('early_stopping_patience', 5, 'Evaluations without improvement before '
              'training stops.', lower_bound=1)
    d.float('early_stopping_check_secs', 10, 'How often training reads the ledger.',
            lower_bound=0)


def define_device_flags(d):
    """Devices, distribution and precision (checked against the devices in trainer.cluster.devices)."""
    d.enum('distribution', 'none', ('none', 'mirrored', 'multi_worker_mirrored'), 'mirrored: '
           'synchronous training over this machine\'s GPUs (MirroredStrategy); '
           'multi_worker_mirrored: synchronous all-reduce across a TF_CONFIG cluster of a chief '
           'and workers, no ps (MultiWorkerMirroredStrategy); --batch_size is the global batch, '
           'split across replicas. none: one device, or a TF_CONFIG cluster\'s '
           'parameter-server training.')
    d.integer('num_gpus', None, 'GPUs to use (default: all visible).', lower_bound=0)
    d.integer('cpu_replicas', 1, 'With --distribution=mirrored and no GPU: mirror over '
              'this many CPU devices (to try the multi-device path on a CPU).', lower_bound=1)
    d.enum('precision', 'float32', ('float32', 'mixed_bfloat16', 'mixed_float16', 'auto'),
           'Keras mixed-precision policy in the model: layers compute in 16 bits with '
           'float32 variables; logits, loss and metrics stay float32. mixed_float16 '
           '(GPUs) scales the loss; mixed_bfloat16 suits CPUs with AVX512-BF16 or AMX '
           '(elsewhere it is emulated, several times slower). auto: mixed_bfloat16 on '
           'such a CPU, else float32.')
    d.bool('xla', False, 'XLA JIT compilation of the training graph '
           '(auto-clustering, CPU and GPU).')
    d.integer('intra_op_threads', 0, 'Threads one op (a matmul, a convolution) may use: '
              'the session config\'s intra_op_parallelism_threads; 0: TensorFlow decides '
              '(one per core).', lower_bound=0)
    d.integer('inter_op_threads', 0, 'Ops run at once: the session config\'s '
              'inter_op_parallelism_threads; 0: TensorFlow decides.', lower_bound=0)


def flagfile_text(flag_values) -> str:
    """The trainer's flags as --flagfile lines, sorted (MODEL_DIR/flags.txt), then --usr_dir's."""
    return _flag_lines(flag_values) + usr_dir.flagfile_lines()


def defaults_as_flagfile() -> str:
    """The defaults as flags.txt would record them: what a recorded run is read against."""
    return _flag_lines(_at_defaults())


def _flag_lines(flag_values) -> str:
    lines = [flag.serialize() for flag in flag_values.get_flags_for_module(__name__)
             if flag.name != 'usr_dir']
    return ''.join(f'{line}\n' for line in sorted(lines) if line)
