"""The replicas of a TF_CONFIG cluster, one set of flags for `deploy` and `./run.sh cluster`.

--evaluator is on by default: on a cluster the chief trains and does not evaluate, so a job
without an evaluator records no evaluation and exports no SavedModel (the eval job exports
from its ledger), and a tuning trial has no metric. --noevaluator (or --evaluators=0) for a
job that only trains.
"""
import dataclasses

from absl import flags

from common.errors import UserError

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_integer('workers', 1, 'Workers besides the chief.', lower_bound=0)
    flags.DEFINE_integer('ps', 1, 'Parameter servers (0 with --sync).', lower_bound=0)
    flags.DEFINE_boolean('sync', False, 'Synchronous training: the chief and workers all-reduce '
                         'every step (--distribution=multi_worker_mirrored), no parameter servers.')
    flags.DEFINE_boolean('evaluator', True, 'An evaluator: the eval job (--mode=continuous_eval: '
                         '--eval_name, --export_dir...), which evaluates every checkpoint and '
                         'exports from its ledger (--noevaluator: train only).')
    flags.DEFINE_integer('evaluators', None, 'How many evaluators (instead of --evaluator): eval '
                         'jobs sharing --eval_name, each checkpoint evaluated by one of them; '
                         'each replica gets its index in TF_CONFIG.', lower_bound=0)


@dataclasses.dataclass(frozen=True)
class Replicas:
    """Besides the chief: workers, parameter servers (none with sync) and evaluators."""
    workers: int
    ps: int
    evaluators: int
    sync: bool

    @classmethod
    def from_flags(cls, flag_values: flags.FlagValues = FLAGS) -> 'Replicas':
        return cls(flag_values.workers, num_ps(flag_values), evaluator_count(flag_values),
                   flag_values.sync)


def evaluator_count(flag_values: flags.FlagValues) -> int:
    """--evaluators=N, else one evaluator unless --noevaluator."""
    if flag_values.evaluators is None:
        return int(flag_values.evaluator)
    if flag_values['evaluator'].present and flag_values.evaluator != bool(flag_values.evaluators):
        raise UserError(f'--evaluators={flag_values.evaluators} contradicts '
                        f'--{"" if flag_values.evaluator else "no"}evaluator; keep one')
    return flag_values.evaluators


def num_ps(flag_values: flags.FlagValues) -> int:
    """--ps, or none with --sync: all-reduce across the chief and workers needs no ps."""
    if flag_values.sync and flag_values['ps'].present and flag_values.ps:
        raise UserError(f'--sync trains without parameter servers: drop --ps={flag_values.ps} '
                        '(or give --ps=0)')
    return 0 if flag_values.sync else flag_values.ps
