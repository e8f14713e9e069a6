"""`python -m benchmarks.image_bench [--quick]`: the bench's image-folder sections (10 and 11 of
`./run.sh bench`, benchmarks/bench_images.py) alone; the bench's own flags apply."""
from benchmarks import input_bench
from common import cli


def main(argv):
    return input_bench.main(argv, sections=('images',))


if __name__ == '__main__':
    input_bench.define_flags()
    cli.run(main, own_modules=[])  # bad flags: one line, exit 2
