"""Where a run stands, on one screen: ./run.sh status --model_dir=M [--format=json]

  python -m trainer.observe.status --model_dir=runs/mnist [--export_dir=EXPORTS] [--format=json]

The model and the flags its run set (every flag with --format=json), the latest step
against --train_steps, the checkpoints kept, whether training finished or stopped early and
why, each eval job (steps evaluated, skipped, waiting; latest and best metrics; which job
evaluated each step), the exports and their pointers.

summarize() is a pure function from what was read (a Snapshot) to a plain dict;
render_text() and json.dumps() show that dict; read_snapshot() reads the model_dir
through the modules that own each file.
"""
import dataclasses
import json
import math
import textwrap
from typing import Dict, List, Optional

from absl import flags

from common import cli, files
from common.errors import UserError
from trainer.config import flags as trainer_flags
from trainer.evaluation import claims, export_policy
from trainer.model_dir import checkpoints, ledger, run_files
from trainer.model_dir.metric_goal import MetricGoal, evaluated_by_step
from trainer.usr_dir import command_line as usr_dir

NOT_METRICS = ('global_step',)
FLAGS = flags.FLAGS


@dataclasses.dataclass
class Snapshot:
    model_dir: str
    flags: Dict[str, str]  # the last training run's flags (flags.txt), name -> value as text
    checkpoints: List[int]  # steps of the complete checkpoints kept, oldest first
    latest_checkpoint_age_secs: Optional[float]
    train_finished: Optional[run_files.TrainFinished]  # recorded by the chief when training ended
    eval_ledgers: Dict[str, List[ledger.LedgerEntry]]  # eval name -> its ledger's entries
    exports: Dict[str, Dict]  # export dir -> {'steps': [...], 'pointers': {'best': step}}
    # The last training run's --usr_dir folders -> sha256 of their files (flags.txt).
    usr_dirs: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)
    # Where the first training run took its weights from (--warm_start_from), if it did.
    warm_start: Optional[Dict] = None


def summarize(snapshot: Snapshot) -> Dict:
    return {
        'model_dir': snapshot.model_dir,
        'model': snapshot.flags.get('model'),
        'flags': snapshot.flags,
        'usr_dirs': [{'usr_dir': path, 'sha256': sha256}
                     for path, sha256 in snapshot.usr_dirs.items()],
        'warm_start': snapshot.warm_start,
        'training': training_summary(snapshot),
        'checkpoints': snapshot.checkpoints,
        'eval_jobs': [eval_job_summary(name, entries, snapshot.checkpoints)
                      for name, entries in sorted(snapshot.eval_ledgers.items())],
        'exports': [{'export_dir': export_dir, **exports}
                    for export_dir, exports in sorted(snapshot.exports.items())],
    }


def training_summary(snapshot: Snapshot) -> Dict:
    train_steps = snapshot.flags.get('train_steps')
    train_steps = int(train_steps) if train_steps else None
    latest = snapshot.checkpoints[-1] if snapshot.checkpoints else None
    summary = {'latest_step': latest, 'train_steps': train_steps,
               'percent': (round(100 * latest / train_steps, 1)
                           if latest is not None and train_steps else None)}
    finished = snapshot.train_finished
    if finished:
        summary.update(state='stopped early' if finished.early_stopped else 'finished',
                       final_step=finished.step, reason=finished.reason)
    elif latest is None:
        summary.update(state='no checkpoint yet')
    else:
        summary.update(state='not finished', reason='running, or stopped before --train_steps',
                       latest_checkpoint_age_secs=snapshot.latest_checkpoint_age_secs)
    return summary


def _metrics_text(metrics: Dict[str, float]) -> str:
    """'accuracy 0.979, loss 0.06447, accuracy_of_class: lowest 0.9211 (eight) of 10': a group of
    metrics (GROUP/NAME, one per class) as its lowest, one alone (label/mean) as itself."""
    groups: Dict[str, Dict[str, float]] = {}
    for name, value in metrics.items():
        group, _, member = name.partition('/')  # 'loss': the group of one, 'loss'
        groups.setdefault(group, {})[member] = value
    plain = [f'{name} {_number(value)}' for name, value in metrics.items()
             if len(groups[name.partition('/')[0]]) == 1]
    for group, members in ((g, m) for g, m in groups.items() if len(m) > 1):
        lowest = min(members, key=members.get)
        plain.append(f'{group}: lowest {_number(members[lowest])} ({lowest}) of {len(members)}')
    return ', '.join(plain)


def numeric_metrics(entry: ledger.LedgerEntry) -> Dict[str, float]:
    return {name: value for name, value in sorted(entry.metrics.items())
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            and name not in NOT_METRICS}


def eval_job_summary(name: str, entries: List[ledger.LedgerEntry],
                     checkpoint_steps: List[int]) -> Dict:
    """Steps evaluated, skipped and waiting; the latest metrics; the best value of each metric."""
    evaluated = evaluated_by_step(entries)
    last = max((e.step for e in entries), default=-1)
    summary = {
        'name': name,
        'eval_files': entries[-1].eval_files if entries else None,
        'evaluated': [e.step for e in evaluated],
        'skipped': sorted(e.step for e in entries if e.status == ledger.SKIPPED),
        'waiting': [step for step in checkpoint_steps if step > last],
        'latest': None, 'best': {},
        'evaluated_by': evaluated_by(entries),
    }
    if evaluated:
        summary['latest'] = {'step': evaluated[-1].step,
                             'metrics': numeric_metrics(evaluated[-1])}
        for metric in summary['latest']['metrics']:
            goal = MetricGoal.of(metric, None, '--metric')
            best = goal.best([e for e in evaluated if metric in e.metrics])
            if best is not None:
                summary['best'][metric] = {'step': best.step, 'value': best.metrics[metric],
                                           'mode': goal.mode}
    return summary


def evaluated_by(entries: List[ledger.LedgerEntry]) -> List[Dict]:
    """Which eval job wrote each step's entry: [{'evaluator': 'evaluator1 (pid 7 on h)',
    'steps': [...]}], in order of each one's first step; [] for ledgers older than claims."""
    if not any(entry.evaluated_by for entry in entries):
        return []
    steps = {}
    for entry in entries:
        steps.setdefault(claims.describe(entry.evaluated_by), []).append(entry.step)
    return [{'evaluator': who, 'steps': done} for who, done in steps.items()]


def _number(value) -> str:
    if isinstance(value, float):
        return 'nan' if math.isnan(value) else f'{value:.4g}'
    return str(value)


def _steps(steps: List[int], most: int = 8) -> str:
    if not steps:
        return 'none'
    shown = ', '.join(str(step) for step in steps[-most:])
    return shown if len(steps) <= most else f'... {shown}'


def render_text(report: Dict) -> str:
    lines = [f'model_dir   {report["model_dir"]}',
             f'model       {report["model"] or "unknown (no flags.txt: never trained here)"}']
    flags = report['flags']
    if flags:
        # The flags the run set: each at its default would bury them (--format=json has all).
        defaults = run_files.read_flagfile(trainer_flags.defaults_as_flagfile())
        shown = [f'--{name}={value}' for name, value in sorted(flags.items())
                 if name not in ('model', 'model_dir', 'usr_dir') and defaults.get(name) != value]
        lines += textwrap.wrap(' '.join(shown) or '(none: all at their defaults)', width=100,
                               initial_indent='flags set   ', subsequent_indent=' ' * 12,
                               break_on_hyphens=False, break_long_words=False)  # copyable
    lines += [f'usr_dir     {folder["usr_dir"]}' + (f' (sha256 {folder["sha256"][:12]})'
                                                      if folder['sha256'] else '')
              for folder in report['usr_dirs']]
    if report.get('warm_start'):
        started = report['warm_start']
        lines.append(f'started     from {started["checkpoint"]} (--warm_start_from='
                     f'{started["source"]}, --warm_start_vars={started["variables"]})')
    training = report['training']
    progress = f'step {_number(training["latest_step"])}'
    if training['train_steps']:
        progress += f'/{training["train_steps"]}'
        if training['percent'] is not None:
            progress += f' ({training["percent"]:g}%)'
    state = training['state']
    if training.get('reason'):
        state += f': {training["reason"]}'
    if training.get('latest_checkpoint_age_secs') is not None:
        state += f'; latest checkpoint {training["latest_checkpoint_age_secs"]:.0f} s ago'
    lines.append(f'training    {progress}, {state}')
    lines.append(f'checkpoints {_steps(report["checkpoints"])}')
    for job in report['eval_jobs']:
        lines.append(f'eval_{job["name"]}  on {job["eval_files"]}: {len(job["evaluated"])} '
                     f'evaluated, {len(job["skipped"])} skipped'
                     + (f' ({_steps(job["skipped"])})' if job['skipped'] else '')
                     + f', {len(job["waiting"])} waiting'
                     + (f' ({_steps(job["waiting"])})' if job['waiting'] else ''))
        if job['latest']:
            lines.append(f'    latest  step {job["latest"]["step"]}: '
                         + _metrics_text(job['latest']['metrics']))
            lines.append('    best    ' + ', '.join(
                f'{name} {_number(best["value"])} (step {best["step"]})'
                for name, best in job['best'].items() if '/' not in name))
        for who in job['evaluated_by']:
            lines.append(f'    by      {who["evaluator"]}: {_steps(who["steps"], most=12)}')
    if not report['eval_jobs']:
        lines.append('eval jobs   none')
    for exports in report['exports']:
        pointers = ', '.join(f'{name} -> {step}' for name, step in sorted(exports['pointers'].items()))
        served = exports.get('served')
        lines.append(f'exports     {exports["export_dir"]}: {_steps(exports["steps"])}'
                     + (f'; {pointers}' if pointers else '')
                     + (f'; models.config serves {served}' if served is not None else ''))
    return '\n'.join(lines)


def read_snapshot(model_dir: str, export_dirs: List[str] = ()) -> Snapshot:
    """What status shows, read through the modules that own each file.

    Exports: the --export_dir of each eval job (from its ledger), of the trainer's flags,
    and export_dirs.
    """
    flags_text = run_files.recorded_flags(model_dir) or ''
    flags = run_files.read_flagfile(flags_text)
    listed = checkpoints.list_checkpoints(model_dir)
    ledgers = {name: ledger.Ledger(model_dir, name).entries()
               for name in ledger.eval_names(model_dir)}
    export_dirs = set(export_dirs) | {entry.export_dir for entries in ledgers.values()
                                      for entry in entries if entry.export_dir}
    if flags.get('export_dir'):
        export_dirs.add(flags['export_dir'])
    return Snapshot(
        model_dir=model_dir, flags=flags, usr_dirs=usr_dir.recorded_folders(flags_text),
        checkpoints=[step for step, _ in listed],
        latest_checkpoint_age_secs=checkpoints.age_secs(listed[-1][1]) if listed else None,
        train_finished=run_files.train_finished(model_dir), eval_ledgers=ledgers,
        warm_start=run_files.recorded_warm_start(model_dir),
        exports={export_dir: export_policy.listed_exports(export_dir) for export_dir in export_dirs})


def define_flags():
    flags.DEFINE_string('model_dir', None, 'The model_dir to report on.')
    flags.DEFINE_list('export_dir', [], 'More export folders to list (those the eval jobs '
                      'exported to are found in their ledgers).')
    flags.DEFINE_enum('format', 'text', ('text', 'json'), 'text: one screen; json: the same, '
                      'as one JSON object.')
    flags.mark_flag_as_required('model_dir')


def main(argv):
    if argv[1:]:
        raise UserError(f'unexpected arguments {argv[1:]}')
    if not files.isdir(FLAGS.model_dir):
        raise UserError(f'--model_dir={FLAGS.model_dir}: no such folder')
    report = summarize(read_snapshot(FLAGS.model_dir, FLAGS.export_dir))
    print(json.dumps(report, indent=1) if FLAGS.format == 'json' else render_text(report))
    return 0


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[], user_errors=(UserError,))
