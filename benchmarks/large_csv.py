"""`prepare csv` on a large generated CSV (`python -m benchmarks.table_bench --table_csv_gb=1`):
its MB/s and rows/s, CPU-seconds and peak RSS, in one run beside the two other ways of reading
the same file: pyarrow's read_csv (the parse alone, the ceiling of the parse prepare does) and one
unshuffled pass of tf.data.experimental.make_csv_dataset.

prepare csv runs as the user runs it, a child process (`python -m input_fns.prepare csv`, 20
training shards, the default 0.2 held out); its CPU-seconds (user + system) are its own, from
wait4's resource usage, with its worker processes' (sampled from /proc, up to 0.1 s of each
one's last work unseen), and its peak RSS its own (the parent's memory is not counted), beside
the peak of the processes' summed PSS. The load average is printed before and after each: on a
shared machine the wall-clock figures move with it, the CPU-seconds a MB much less.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import pyarrow.csv
from absl import flags

from benchmarks import bench_tables

FLAGS = flags.FLAGS


def high_water_mb(pid: int) -> float:
    """A process's peak RSS so far (VmHWM): its own, not the parent's it was started from, as
    getrusage(RUSAGE_CHILDREN) would count through vfork and exec."""
    try:
        with open(f'/proc/{pid}/status') as status:
            for line in status:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
    except OSError:  # it has just exited
        pass
    return 0.0


def _load() -> str:
    return ' '.join(f'{value:.2f}' for value in os.getloadavg())


def _process_tree(root: int) -> List[int]:
    """root and every process below it (prepare's fork server and its worker processes)."""
    children: Dict[int, List[int]] = {}
    for name in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{name}/stat') as stat:
                parent = int(stat.read().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(name))
    tree, todo = [], [root]
    while todo:
        tree.append(todo.pop())
        todo.extend(children.get(tree[-1], []))
    return tree


def _cpu_and_pss(pid: int) -> Optional[Tuple[float, float]]:
    """A process's CPU-seconds so far and its proportional set size (MiB: shared pages split
    among the processes sharing them, so a tree's sum is the memory it holds)."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
        with open(f'/proc/{pid}/smaps_rollup') as rollup:
            pss = next(int(line.split()[1]) for line in rollup if line.startswith('Pss:'))
    except (OSError, StopIteration):  # it has just exited
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK'), pss / 1024


def _prepare(source: str, output_dir: str, label: str) -> dict:
    """prepare csv in a child process: wall and CPU seconds, peak RSS; its worker processes'
    CPU-seconds (which wait4 does not count: the fork server reaps them) and the tree's peak
    summed PSS, sampled every 0.1 s."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, '-m', 'input_fns.prepare', 'csv',
                              f'--source={source}', f'--label={label}',
                              f'--output_dir={output_dir}', '--num_shards=20'],
                             stdout=subprocess.DEVNULL)
    workers_cpu: Dict[int, float] = {}
    peak_pss = 0.0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        sampled = {pid: _cpu_and_pss(pid) for pid in _process_tree(child.pid)}
        sampled = {pid: figures for pid, figures in sampled.items() if figures}
        workers_cpu.update({pid: cpu for pid, (cpu, _) in sampled.items() if pid != child.pid})
        peak_pss = max(peak_pss, sum(pss for _, pss in sampled.values()))
        time.sleep(0.1)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f'prepare csv exited {child.returncode}')
    own = usage.ru_utime + usage.ru_stime
    return {'seconds': time.perf_counter() - started,
            'cpu_seconds': own + sum(workers_cpu.values()), 'own_cpu_seconds': own,
            'processes': 1 + len(workers_cpu), 'peak_pss_mb': peak_pss,
            'peak_rss_mb': usage.ru_maxrss / 1024}  # Linux: KiB


def _timed(read) -> float:
    started = time.perf_counter()
    read()
    return time.perf_counter() - started


def large_csv_figure(gigabytes: float) -> dict:
    """The figures of prepare csv, pyarrow's read_csv and make_csv_dataset on a generated CSV
    of `gigabytes` GB (--table_csv_kind), at --table_csv_path or in a temporary folder."""
    folder = tempfile.mkdtemp(prefix='table_bench-')
    kind, label = FLAGS.table_csv_kind, bench_tables.CSV_KINDS[FLAGS.table_csv_kind][2]
    try:
        source = FLAGS.table_csv_path or os.path.join(folder, 'big.csv')
        if not os.path.exists(source):
            started = time.perf_counter()
            bench_tables.write_csv(source, gigabytes=gigabytes, kind=kind)
            print(f'wrote {source} in {time.perf_counter() - started:.0f} s', flush=True)
        size = os.path.getsize(source)
        with open(source, 'rb') as f:
            rows = sum(block.count(b'\n') for block in iter(lambda: f.read(1 << 24), b'')) - 1
        figure = {'csv': source, 'kind': kind, 'csv_bytes': size, 'rows': rows,
                  'load_before_prepare': _load()}
        figure.update(_prepare(source, os.path.join(folder, 'shards'), label))
        figure['load_after_prepare'] = _load()
        own = resource.getrusage(resource.RUSAGE_SELF)
        figure['arrow_parse_seconds'] = _timed(lambda: pyarrow.csv.read_csv(source))
        figure['arrow_parse_cpu_seconds'] = (resource.getrusage(resource.RUSAGE_SELF).ru_utime
                                             - own.ru_utime)
        figure['make_csv_dataset_seconds'] = _timed(
            lambda: bench_tables.make_csv_pass(source, 1024, label))
        figure['load_after_readers'] = _load()
        megabytes = size / 1e6
        for name in ('', 'arrow_parse_', 'make_csv_dataset_'):
            figure[f'{name}mb_per_sec'] = megabytes / figure[f'{name}seconds']
        figure['rows_per_sec'] = rows / figure['seconds']
        figure['mb_per_cpu_second'] = megabytes / figure['cpu_seconds']
        figure['against_arrow_parse'] = figure['arrow_parse_seconds'] / figure['seconds']
        figure['against_make_csv_dataset'] = figure['make_csv_dataset_seconds'] / figure['seconds']
        return figure
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(figure: dict) -> None:
    """The figure as lines a person reads, then as one JSON-like dict."""
    print(f"{figure['csv']} ({figure['kind']}): {figure['csv_bytes'] / 1e6:,.1f} MB, "
          f"{figure['rows']:,} rows")
    print(f"prepare csv (a child process, 20 shards, 0.2 held out): {figure['seconds']:.1f} s, "
          f"{figure['mb_per_sec']:.2f} MB/s, {figure['rows_per_sec']:,.0f} rows/s; "
          f"{figure['cpu_seconds']:.1f} CPU-s ({figure['mb_per_cpu_second']:.1f} MB a CPU-second)"
          f" in {figure['processes']} processes ({figure['own_cpu_seconds']:.1f} its own), peak "
          f"RSS {figure['peak_rss_mb']:,.0f} MiB its own, {figure['peak_pss_mb']:,.0f} MiB of "
          f"PSS all of them; load {figure['load_before_prepare']} "
          f"before, {figure['load_after_prepare']} after")
    print(f"pyarrow.csv.read_csv, the parse alone: {figure['arrow_parse_seconds']:.1f} s, "
          f"{figure['arrow_parse_mb_per_sec']:.1f} MB/s ({figure['arrow_parse_cpu_seconds']:.1f}"
          f" user CPU-s); prepare csv at {figure['against_arrow_parse']:.2f}x its speed")
    print(f"make_csv_dataset, one unshuffled pass (batch 1024): "
          f"{figure['make_csv_dataset_seconds']:.1f} s, "
          f"{figure['make_csv_dataset_mb_per_sec']:.1f} MB/s; prepare csv at "
          f"{figure['against_make_csv_dataset']:.2f}x its speed; load after "
          f"{figure['load_after_readers']}")
    print(figure, flush=True)
