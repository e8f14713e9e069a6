"""`python -m benchmarks.table_bench [--quick]`: the bench's table sections (12 and 13 of
`./run.sh bench`, benchmarks/bench_tables.py) alone, or with --table_csv_gb=N the large-CSV
figure instead (benchmarks/large_csv.py); the bench's own flags apply."""
from absl import flags

from benchmarks import input_bench, large_csv
from common import cli

FLAGS = flags.FLAGS


def main(argv):
    if FLAGS.table_csv_gb:
        large_csv.report(large_csv.large_csv_figure(FLAGS.table_csv_gb))
        return 0
    return input_bench.main(argv, sections=('tables',))


if __name__ == '__main__':
    input_bench.define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
