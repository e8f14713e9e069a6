"""`python -m benchmarks.image_memory [--photos=2000] [--scale=10] [--sides=40,120]
[--prepare_args='--stored_as=jpeg']`: `prepare images`' peak memory on a generated photo tree
(bench_images.write_photo_tree) of --photos and of --scale times as many, each prepared by
`python -m input_fns.prepare images` in a child process: its peak RSS (VmHWM) and the most its
process tree held at once (itself, the fork server and the decode workers, sampled every 0.2 s),
with photos/s; then the ratios, scaled against 1x."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import bench_images, large_csv

FLAGS = flags.FLAGS
flags.DEFINE_integer('photos', 2000, 'Photos in the 1x tree.', lower_bound=10)
flags.DEFINE_integer('scale', 10, 'The larger tree holds this many times --photos.', lower_bound=2)
flags.DEFINE_list('sides', ['40', '120'], 'The shortest and longest side of a photo, in pixels.')
flags.DEFINE_string('prepare_args', '', 'More flags for prepare images (e.g. --stored_as=jpeg).')


def tree_rss_mb(pid: int) -> float:
    """The resident memory of a process and all its descendants now."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f'/proc/{current}/status') as status:
                total += next((int(line.split()[1]) for line in status
                               if line.startswith('VmRSS:')), 0) / 1024
            with open(f'/proc/{current}/task/{current}/children') as children:
                pending += [int(child) for child in children.read().split()]
        except OSError:  # it has just exited
            continue
    return total


def prepared_figure(root: str, output_dir: str, photos: int) -> dict:
    command = [sys.executable, '-m', 'input_fns.prepare', 'images', f'--source_dir={root}',
               f'--output_dir={output_dir}', *shlex.split(FLAGS.prepare_args)]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak_mb = tree_mb = 0.0
    while child.poll() is None:
        peak_mb = max(peak_mb, large_csv.high_water_mb(child.pid))
        tree_mb = max(tree_mb, tree_rss_mb(child.pid))
        time.sleep(0.2)
    if child.returncode:
        raise RuntimeError(f'prepare images exited {child.returncode}')
    seconds = time.perf_counter() - started
    return {'photos': photos, 'seconds': seconds, 'photos_per_sec': photos / seconds,
            'peak_rss_mb': peak_mb, 'tree_rss_mb': tree_mb}


def main(argv):
    del argv
    shortest, longest = (int(side) for side in FLAGS.sides)
    folder = tempfile.mkdtemp(prefix='image_memory-')
    figures = []
    try:
        for photos in (FLAGS.photos, FLAGS.photos * FLAGS.scale):
            root = os.path.join(folder, f'photos_{photos}')
            bench_images.write_photo_tree(root, photos, sides=(shortest, longest))
            figures.append(prepared_figure(root, os.path.join(folder, f'data_{photos}'), photos))
            print(figures[-1], flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    small, large = figures
    print(f'{FLAGS.scale}x the photos: peak RSS {large["peak_rss_mb"] / small["peak_rss_mb"]:.2f}x '
          f'({small["peak_rss_mb"]:.0f} -> {large["peak_rss_mb"]:.0f} MiB), process tree '
          f'{large["tree_rss_mb"] / small["tree_rss_mb"]:.2f}x ({small["tree_rss_mb"]:.0f} -> '
          f'{large["tree_rss_mb"]:.0f} MiB)')


if __name__ == '__main__':
    app.run(main)
