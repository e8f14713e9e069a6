"""Claims: several eval jobs under one --eval_name share its checkpoints, each evaluated once.

Before it evaluates a step, a job claims it: MODEL_DIR/eval_NAME/claims/step-000000400.json
names the owner (host, pid, when that process started, its cluster task), a random token and
when it was last renewed; a thread renews it every --lease_timeout_secs / 4 while the job
evaluates. A claim is taken over, saying why in one line, when its owner is this job restarted
in place, a process of this host that no longer runs, or silent for --lease_timeout_secs (the
training lease's rules and protocol, common.lease).

The ledger entry is written through the claim (Claim.commit): only while the claim is still
its owner's and the step has no entry yet; then the claim is removed. On a local disk every
claim, renewal and commit happens under one OS lock (claims/.lock): each checkpoint gets
exactly one evaluation and one ledger entry. On s3:// and gs:// a claim is written by the
store's conditional writes (common/lease.py): of two jobs claiming a step at once exactly one
gets it. A bucket without them (ram://) has the claim read back after settle_secs and checked
again before the entry is written, so two jobs seldom evaluate one step twice; the entry stays
one whole object named by its step: at most a duplicate evaluation, never a duplicate or a
lost entry.
"""
import contextlib
import dataclasses
import os
from typing import Callable, Optional, Set, Union

from absl import logging

from common import files, lease, paths, process_lock, tf_config
from common.errors import UserError
from trainer.model_dir import ledger
from trainer.model_dir.ledger import Evaluator, LedgerEntry

CLAIMS_DIR = 'claims'
LOCK_NAME = '.lock'
EXPORTS_LOCK_NAME = '.exports.lock'


def identity() -> Evaluator:
    """Who evaluates, as ledger entries and status name it: host, pid and cluster task."""
    role = tf_config.role()
    owner = lease.process_owner()
    return Evaluator(host=owner.host, pid=owner.pid,
                     task=f'{role.task_type}{role.index}' if role.task_type else 'local')


def describe(who: Union[Evaluator, lease.Owner, None]) -> str:
    """'evaluator1 (pid 7 on host-b)'; 'unknown' for an entry written before claims, or a claim
    that cannot be read."""
    if who is None:
        return 'unknown'
    return f'{who.task} (pid {who.pid} on {who.host})'


class Claims:
    """The claims of one eval name's checkpoints, made by this process."""

    def __init__(self, eval_ledger: ledger.Ledger, eval_files: str,
                 lease_secs: float = lease.LEASE_SECS, settle_secs: float = lease.SETTLE_SECS):
        self.ledger = eval_ledger
        self.eval_files = eval_files
        self.dir = paths.join(eval_ledger.dir, CLAIMS_DIR)
        self.lease_secs, self.settle_secs = lease_secs, settle_secs
        self.owner = dataclasses.replace(lease.process_owner(), task=identity().task)
        self.holders = {}  # step -> the owner of another job's live claim, as last seen

    def path(self, step: int) -> str:
        return paths.join(self.dir, ledger.result_name(step))

    def guarded(self, name: str = LOCK_NAME):
        """On a local disk, the OS lock every claim, renewal and commit is made under."""
        if not paths.is_local(self.dir):
            return contextlib.nullcontext()
        return process_lock.locked(os.path.join(paths.local_path(self.dir), name))

    def exporting(self):
        """On a local disk, one job at a time makes exports from the ledger."""
        return self.guarded(EXPORTS_LOCK_NAME)

    def claimed_steps(self) -> Set[int]:
        """The steps that have a claim object (held, or left by a job that died)."""
        return {int(match.group(1)) for match in map(ledger.RESULT_NAME.match,
                                                     files.listdir(self.dir)) if match}

    def try_claim(self, step: int) -> Optional['Claim']:
        """This job's claim on step; None when the ledger has it or another live job claims it."""
        claim = Claim(self, step)
        with self.guarded():
            if self.ledger.find(step) is not None:
                return None
            held = claim.read()
            if held is not None and not self._taken_over(step, held):
                return None
            if not claim.take(held):
                return None  # another job wrote at the same moment, and won
        self.holders.pop(step, None)
        claim.keep_renewed(on_lost=lambda held: None)  # commit says so
        return claim

    def _taken_over(self, step: int, held: lease.LeaseRecord) -> bool:
        if held.owner is not None and held.fields['eval_files'] != self.eval_files:
            raise UserError(f'--eval_name={self.ledger.eval_name}: {describe(held.owner)} '
                            f'evaluates it on --eval_files={held.fields["eval_files"]}; give '
                            f'{self.eval_files} its own --eval_name')
        reason = lease.stale_reason(held, self.owner, self.lease_secs, 'this eval job')
        if reason is None:
            self.holders[step] = held.owner
            return False
        logging.warning('eval_%s: taking over the claim %s of %s: %s', self.ledger.eval_name,
                        self.path(step), describe(held.owner), reason)
        return True


class Claim(lease.LeaseObject):
    """A claim on one step (common.lease), renewed until committed or released (with: ...)."""

    def __init__(self, claims: Claims, step: int):
        super().__init__(claims.path(step), claims.owner, claims.lease_secs, claims.settle_secs,
                         guard=claims.guarded, step=step, eval_files=claims.eval_files)
        self.claims, self.step = claims, step

    def commit(self, write_entry: Callable[[], LedgerEntry]) -> Optional[LedgerEntry]:
        """Writes the step's ledger entry (write_entry) if this claim still holds and the ledger
        lacks the step, then removes the claim; None when nothing was written."""
        self.stop()
        with self.guard():
            held = self.read()
            if not self.is_mine(held):
                logging.warning('eval_%s: step %d was taken over by %s while this job evaluated '
                                'it (silent over --lease_timeout_secs?); this result is dropped',
                                self.claims.ledger.eval_name, self.step,
                                describe(held and held.owner))
                return None
            entry = None
            if self.claims.ledger.find(self.step) is None:
                entry = write_entry()
            self.remove()
        return entry

    def release(self) -> None:
        """Gives the claim up unless already committed: another job may take the step at once."""
        self.stop()
        self.remove_if_mine()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.release()
