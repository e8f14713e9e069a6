"""Screenshots of TensorBoard's Scalars and Images dashboards for a model_dir, in headless Chromium.

  ./run.sh screenshots --model_dir=runs/mnist --output_dir=docs

Starts TensorBoard on 127.0.0.1 (tools/tensorboard_server.py), waits until it has
loaded the training and evaluation scalars and the evaluation pictures, opens
each dashboard (--dashboards: scalars and images; also pr_curves, hparams) in Debian's
`chromium --headless` and saves OUTPUT_DIR/tensorboard_<dashboard>.png. Needs `apt-get install chromium` (or --chromium=PATH).
"""
import os
import shutil
import subprocess

from absl import flags

from common import cli
from common.errors import UserError
from tools.tensorboard_server import TensorBoard

FLAGS = flags.FLAGS
# dashboard -> what TensorBoard must have loaded before the page is worth a picture
DASHBOARDS = {'scalars': 'data/plugin/scalars/tags', 'images': 'data/plugin/images/tags',
              'pr_curves': 'data/plugin/pr_curves/tags', 'hparams': 'data/plugin/scalars/tags'}


def define_flags():
    flags.DEFINE_string('model_dir', None, 'The model_dir (or a folder of them) to show.')
    flags.DEFINE_string('output_dir', 'docs', 'Where the PNGs go.')
    flags.DEFINE_multi_enum('dashboards', ['scalars', 'images'], list(DASHBOARDS),
                            'The dashboards to take (repeat the flag for several).')
    flags.DEFINE_string('chromium', 'chromium', 'The Chromium (or Chrome) binary.')
    flags.DEFINE_string('window_size', '1280,900', 'Browser window, WIDTH,HEIGHT in pixels.')
    flags.DEFINE_string('tag_filter', None, 'Scalars: show only tags matching this regex.')
    flags.DEFINE_integer('render_ms', 8000, 'Virtual time the page gets to load and draw.',
                         lower_bound=1000)
    flags.mark_flag_as_required('model_dir')


def dashboard_url(base_url: str, dashboard: str, tag_filter=None) -> str:
    url = f'{base_url}#{dashboard}'
    return f'{url}&tagFilter={tag_filter}' if tag_filter and dashboard == 'scalars' else url


def screenshot(chromium: str, url: str, path: str, window_size: str, render_ms: int) -> None:
    """Chromium draws the page after render_ms of virtual time (the page's timers run at once)."""
    command = [chromium, '--headless=new', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
               '--no-first-run', '--disable-extensions', '--disable-sync',
               '--disable-background-networking', '--disable-component-update',
               f'--window-size={window_size}', f'--virtual-time-budget={render_ms}',
               f'--screenshot={path}', url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0 or not os.path.exists(path):
        raise RuntimeError(f'{chromium} failed (exit {result.returncode}):\n{result.stderr[-2000:]}')


def main(argv):
    del argv
    if not shutil.which(FLAGS.chromium):
        raise UserError(f'--chromium={FLAGS.chromium} not found; install it '
                        '(apt-get install chromium) or pass its path')
    if not os.path.isdir(FLAGS.model_dir):
        raise UserError(f'--model_dir={FLAGS.model_dir}: no such folder')
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    with TensorBoard(FLAGS.model_dir) as tensorboard:
        for dashboard in FLAGS.dashboards:
            tags_path = DASHBOARDS[dashboard]
            tensorboard.wait_for(lambda: tensorboard.get_json(tags_path), what=dashboard)
            path = os.path.join(FLAGS.output_dir, f'tensorboard_{dashboard}.png')
            screenshot(FLAGS.chromium, dashboard_url(tensorboard.url, dashboard, FLAGS.tag_filter),
                       path, FLAGS.window_size, FLAGS.render_ms)
            print(path, flush=True)
    return 0


if __name__ == '__main__':
    define_flags()
    cli.run(main, own_modules=[], user_errors=(UserError,))
