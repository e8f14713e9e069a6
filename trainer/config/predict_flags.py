"""The flags of --mode=predict and --mode=benchmark_input: a group of the trainer's flags
(trainer/config/flags.py defines it with its own definers, so the flags are that module's)."""


def define_predict_and_benchmark(d):
    d.string('saved_model', None, 'predict: EXPORT_DIR (its newest complete version, as TF Serving '
             'serves it), a version folder EXPORT_DIR/STEP, or a pointer such as EXPORT_DIR/best.')
    d.string('signature', 'serving_default', 'predict: the signature to run: serving_default; '
             'classify (MNIST: class names and scores, through a tf.Example as TF Serving\'s '
             'Classify API sends); embed (face towers).')
    d.enum('decimal', None, ('.', ','), 'predict on a CSV: the mark before a number\'s fraction '
           '(default: , in a ;-separated file, else ., as prepare csv reads it).')
    d.enum('thousands', None, ('.', ','), 'predict on a CSV: the mark grouping a number\'s '
           'thousands, where it could be a decimal mark too (1,234 in a file of decimal points).')
    d.string('encoding', None, 'predict on a CSV: its text encoding where not UTF-8 (or UTF-16 '
             'with a byte-order mark), e.g. cp1252 (Excel on Windows), as for prepare csv.')
    d.string('sheet', None, 'predict on an Excel workbook (.xlsx): the sheet to read, by its '
             'name (default: the first), as for prepare csv.')
    d.integer('benchmark_batches', 300, 'benchmark_input: batches to time each '
              'input pipeline stage for.', lower_bound=3)
    d.integer('benchmark_train_steps', 30, 'benchmark_input: training steps to time '
              'on in-memory input.', lower_bound=3)
