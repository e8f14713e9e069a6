"""What a run under store faults must never leave (issue 38), each check a list of violations
(empty: none). Run after every process has ended, reading the store directly (no faults)."""
import dataclasses
import json
import os
import sys
from typing import List, Optional

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from common import files, lease, paths
from input_fns.records import shards
from trainer.evaluation import claims
from trainer.model_dir import checkpoints, ledger, train_lock
from trainer.serving import export, model_config


def checkpoint_violations(model_dir: str) -> List[str]:
    """The latest checkpoint (as the state file and as listing name it) must restore."""
    named = {tf.train.latest_checkpoint(model_dir)}
    listed = checkpoints.list_checkpoints(model_dir)
    named.add(listed[-1][1] if listed else None)
    return [f'latest checkpoint {path} does not restore ({problem})'
            for path in sorted(filter(None, named)) for problem in [checkpoints.damage(path)]
            if problem]


def ledger_violations(model_dir: str, eval_name: str, steps: List[int]) -> List[str]:
    """One whole entry per checkpoint step (steps: every checkpoint saved), none lost, none
    doubled, nothing else in the results folder."""
    results = ledger.Ledger(model_dir, eval_name).path
    found, problems = {}, []
    for name in files.listdir(results):
        match = ledger.RESULT_NAME.match(name)
        if not match:
            problems.append(f'{results}/{name}: not a ledger entry')
            continue
        try:
            entry = ledger.LedgerEntry.from_json(files.read_json(paths.join(results, name)))
        except ValueError as e:  # not JSON, or a field missing
            problems.append(f'{results}/{name}: not a whole ledger entry ({e})')
            continue
        step = int(match.group(1))
        if entry.step != step:
            problems.append(f'{results}/{name}: the entry of step {entry.step}')
        found.setdefault(step, []).append(name)
    problems += [f'{results}: step {step} has {len(names)} entries ({", ".join(names)})'
                 for step, names in sorted(found.items()) if len(names) > 1]
    problems += [f'{results}: the entry of step {step} is lost' for step in steps
                 if step not in found]
    problems += [f'{results}: step {step} has an entry but no checkpoint was saved'
                 for step in sorted(set(found) - set(steps))]
    return problems


def version_problem(version_dir: str) -> Optional[str]:
    """Why an export is not whole: no marker, a saved_model.pb that does not parse, variables
    that do not restore; None when it is."""
    if not export.is_complete(version_dir):
        return f'no {export.COMPLETE_MARKER}'
    try:
        saved_model_pb2.SavedModel().ParseFromString(
            files.read_bytes(paths.join(version_dir, export.SAVED_MODEL_PB)))
    except Exception as e:  # noqa: BLE001: missing (NotFoundError) or cut short (DecodeError)
        return f'{export.SAVED_MODEL_PB}: {type(e).__name__}'
    return checkpoints.damage(paths.join(version_dir, 'variables', 'variables'))


def export_violations(export_dir: str) -> List[str]:
    """`best`, `latest` and models.config name whole versions, and every version marked
    complete is whole."""
    named = {f'{export_dir}/{name}': export.read_pointer(export_dir, name)
             for name in export.POINTERS}
    named[model_config.config_path(export_dir)] = model_config.pinned_version(export_dir)
    problems = []
    for source, step in sorted(named.items()):
        problem = step is not None and version_problem(paths.join(export_dir, str(step)))
        if problem:
            problems.append(f'{source} names version {step}, which is not whole ({problem})')
    for step in export.complete_versions(export_dir):
        problem = version_problem(paths.join(export_dir, str(step)))
        if problem:
            problems.append(f'{export_dir}/{step} is marked complete but is not whole ({problem})')
    return problems


def shard_violations(data_dir: str) -> List[str]:
    """Every shard the manifest counts is there whole: its size and its records."""
    problems = []
    for split, entry in sorted(shards.read_manifest(data_dir).get('splits', {}).items()):
        for shard in entry['shards']:
            path = paths.join(data_dir, shard['file'])
            if not files.exists(path):
                problems.append(f'{path} ({split}) is in the manifest but missing')
                continue
            size = files.size(path)
            try:
                records = sum(1 for _ in tf.data.TFRecordDataset(path))
            except tf.errors.DataLossError as e:
                records = f'unreadable ({e.message.splitlines()[0]})'
            if (size, records) != (shard['bytes'], shard['records']):
                problems.append(f'{path} ({split}): {size} bytes and {records} records, the '
                                f'manifest counts {shard["bytes"]} and {shard["records"]}')
    return problems


def lease_violations(model_dir: str, eval_names: List[str],
                     lease_secs: float = lease.LEASE_SECS) -> List[str]:
    """Once every job has ended: no training lease or claim that the next run would wait for
    (one whose holder may still run, by the rules the runs take them over with)."""
    objects = [paths.join(model_dir, train_lock.LEASE_NAME)]
    for name in eval_names:
        claims_dir = paths.join(ledger.eval_dir(model_dir, name), claims.CLAIMS_DIR)
        objects += [paths.join(claims_dir, entry) for entry in files.listdir(claims_dir)
                    if ledger.RESULT_NAME.match(entry)]
    me = dataclasses.replace(lease.process_owner(), pid=-1)  # a later run: another process
    problems = []
    for path in objects:
        if not files.exists(path):
            continue
        try:
            held = lease.LeaseRecord.from_json(files.read_json(path))
        except ValueError:
            held = lease.LeaseRecord(owner=None)
        if lease.stale_reason(held, me, lease_secs, 'a restarted job') is None:
            problems.append(f'{path} (pid {held.owner.pid} on {held.owner.host}) would block '
                            f'the next run for up to {lease_secs:g} s')
    return problems


def all_violations(data_dir: str, model_dir: str, export_dir: str, eval_name: str) -> List[str]:
    steps = [step for step, _ in checkpoints.list_checkpoints(model_dir)]
    return (shard_violations(data_dir) + checkpoint_violations(model_dir)
            + ledger_violations(model_dir, eval_name, steps) + export_violations(export_dir)
            + lease_violations(model_dir, [eval_name]))


def main(data_dir: str, model_dir: str, export_dir: str, eval_name: str) -> None:
    """Prints the checks' findings as JSON: run in a process of its own, so that the test's
    process, which serves the proxies, never waits on itself (TensorFlow holds the GIL in some
    calls, such as opening a checkpoint)."""
    print(json.dumps({
        'violations': all_violations(data_dir, model_dir, export_dir, eval_name),
        'checkpoint_steps': [step for step, _ in checkpoints.list_checkpoints(model_dir)],
        'ledger_steps': [entry.step for entry in ledger.Ledger(model_dir, eval_name).entries()]}))


if __name__ == '__main__':
    main(*sys.argv[1:])
    os._exit(0)  # after s3:// use: tensorflow-io aborts in the interpreter's teardown (common.cli)
