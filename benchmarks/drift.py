"""Do two `./run.sh bench` runs agree? `./run.sh python -m benchmarks.drift A.json B.json`

For every target in both runs' --output_json, its ratio in each and the drift between them,
(B - A) / A; a drift beyond --tolerance (5%, the issue's goal for two back-to-back quiet
runs) is marked. Exit 0 when every target agrees, 1 when one does not, 2 for bad input.
"""
import json

from absl import flags

from common import cli
from common.errors import UserError

FLAGS = flags.FLAGS


def read_targets(path: str) -> dict:
    try:
        with open(path) as f:  # local: a file the bench wrote here
            return {t['target']: t['ratio'] for t in json.load(f)['targets']}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f'{path}: not a bench --output_json ({error})')


def drifts(first: dict, second: dict):
    """[(target, ratio in first, ratio in second, relative drift)] for targets in both."""
    return [(name, first[name], second[name], (second[name] - first[name]) / first[name])
            for name in first if name in second]


def main(argv):
    if len(argv) != 3:
        raise UserError('give two bench JSON files: python -m benchmarks.drift A.json B.json')
    rows = drifts(read_targets(argv[1]), read_targets(argv[2]))
    width = max(len(name) for name, *_ in rows)
    beyond = 0
    for name, first, second, drift in rows:
        mark = '' if abs(drift) <= FLAGS.tolerance else f'  beyond {FLAGS.tolerance:.0%}'
        beyond += bool(mark)
        print(f'{name:<{width}}  {first:7.3f}x  {second:7.3f}x  {drift:+7.1%}{mark}')
    print(f'{len(rows) - beyond} of {len(rows)} targets within {FLAGS.tolerance:.0%}')
    return 1 if beyond else 0


if __name__ == '__main__':
    flags.DEFINE_float('tolerance', 0.05, 'The largest relative drift that counts as agreeing.',
                       lower_bound=0.0)
    cli.run(main, own_modules=[], user_errors=(UserError,))  # bad input: one line, exit 2
