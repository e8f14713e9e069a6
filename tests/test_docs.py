"""The docs stay true: every `./run.sh ...` and `python -m ...` command in README.md, BUILD.md
and docs/*.md names a command, flags and repo files that exist; so does the prose's code
(`trainer/run/experiment.py`, the layout table's modules); every relative link and anchor
resolves; and the README's quick-start block runs."""
import ast
import glob
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from helpers import REPO

DOC_FILES = ['README.md', 'BUILD.md'] + sorted(
    os.path.relpath(path, REPO) for path in glob.glob(os.path.join(REPO, 'docs', '*.md')))
QUICK_START_MARKER = '<!-- quick-start'
TABLES_MARKER = '<!-- tables:'  # docs/your-data.md's block
IMAGES_MARKER = '<!-- images:'  # and its image-folder block
KERAS_MARKER = '<!-- keras:'  # docs/your-model.md's Keras model
WARM_START_MARKER = '<!-- warm start:'  # and its fine-tuning of it
FENCE = re.compile(r'^```[^\n]*\n(.*?)^```', re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r'`([^`]+)`')
# What the run.sh subcommand runs: `  trainer) exec "$py" -m trainer.main "$@" ;;`
RUN_SH_CASE = re.compile(r'^\s*([\w-]+)\)\s+exec "\$py"(?: -m ([\w.]+))?[^"\n]* "\$@" ;;', re.MULTILINE)
NOT_OURS = ('pytest', None)  # ./run.sh test, ./run.sh python: their flags are not this project's
# Flags every absl command takes without defining them.
ABSL_PARSER_FLAGS = {'flagfile', 'undefok'}
# Commands that hand flags on to the trainer: the launcher passes the flags it does not know
# to every task; deploy puts the flags after `--` into each replica's command.
PASSES_UNKNOWN_FLAGS_TO = {'trainer.cluster.local_cluster': 'trainer.main'}
FLAGS_AFTER_DOUBLE_DASH_GO_TO = {'trainer.deploy': 'trainer.main', 'tools.sweep': 'trainer.main'}
# The tour's training runs this many steps here rather than the README's.
QUICK_START_TRAIN_STEPS = '4'


def read(relative_path):
    with open(os.path.join(REPO, relative_path), encoding='utf-8') as f:
        return f.read()


def run_sh_modules():
    """{run.sh subcommand: the module it runs with -m, or None for `python`}."""
    return {name: module or None for name, module in RUN_SH_CASE.findall(read('run.sh'))}


def command_texts(markdown):
    """The shell lines of every fenced block (continuations joined) and every inline code span."""
    texts = [line for block in FENCE.findall(markdown)
             for line in block.replace('\\\n', ' ').splitlines()]
    prose = FENCE.sub('', markdown)
    texts += [span.replace('\n', ' ') for span in INLINE_CODE.findall(prose)]
    return texts


def simple_commands(text):
    """A shell line as its simple commands' words, split at | & ; and without redirections."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: prose, not a command
        return []
    commands, words, skip_next = [], [], False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif token in ('>', '>>', '<'):
            skip_next = True
        elif token and set(token) <= set('|&;()'):
            commands.append(words)
            words = []
        else:
            words.append(token)
    return [words for words in commands + [words] if words]


class DocCommand:
    """One command a doc gives: the module it runs and the words after it."""

    def __init__(self, doc, text, module, args, run_sh_name=None):
        self.doc, self.text, self.module, self.args, self.run_sh_name = (
            doc, text, module, args, run_sh_name)

    def flag_uses(self):
        """(flag name, the module that must define it) for every --flag, in order."""
        owner = self.module
        for arg in self.args:
            arg = arg.strip('[]()')
            if arg == '--':
                owner = FLAGS_AFTER_DOUBLE_DASH_GO_TO.get(self.module, owner)
            elif arg.startswith('--') and len(arg) > 2:
                yield arg[2:].split('=', 1)[0], owner

    def values(self):
        """Every positional word and --flag value: candidates for repo paths."""
        for arg in self.args:
            arg = arg.strip('[]()')
            if arg.startswith('--'):
                if '=' in arg:
                    yield arg.split('=', 1)[1]
            elif not arg.startswith('-'):
                yield arg

    def __repr__(self):
        return f'{self.doc}: {self.text.strip()}'


def doc_commands():
    run_sh = run_sh_modules()
    found = []
    for doc in DOC_FILES:
        for text in command_texts(read(doc)):
            for words in simple_commands(text):
                while words and re.fullmatch(r'[A-Z_]+=\S*', words[0]):  # TF_VARIANT=gpu ./run.sh
                    words = words[1:]
                if words[:1] == ['./run.sh']:
                    name = words[1] if len(words) > 1 else 'demo'
                    found.append(DocCommand(doc, text, run_sh.get(name), words[2:], name))
                elif (len(words) > 2 and os.path.basename(words[0]).startswith('python')
                      and words[1] == '-m'):
                    found.append(DocCommand(doc, text, words[2], words[3:]))
    return found


def module_file(module):
    """The file `python -m module` runs, if the module is in the tree."""
    if not module:
        return None
    base = os.path.join(REPO, *module.split('.'))
    return next((path for path in (base + '.py', os.path.join(base, '__main__.py'))
                 if os.path.isfile(path)), None)


def runs_as(module):
    """The module `python -m module` runs: a package's __main__, else the module itself."""
    return f'{module}.__main__' if module_file(module).endswith('__main__.py') else module


def main_block_statements(module):
    """The statements of a module's `if __name__ == '__main__':` block but the one running main."""
    with open(module_file(module)) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and getattr(node.test.left, 'id', None) == '__name__'):
            return [statement for statement in node.body if not (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                and getattr(statement.value.func, 'attr', None) == 'run')]
    return []


def flags_each_module_defines(modules):
    """{module: (its flag names, its boolean flag names)}, after running what its __main__ block
    runs before main; and '' for the flags every command gets (absl's logging and help flags).

    Runs in a fresh process (see accepted_flags): absl's FLAGS is global, and two commands
    define flags of the same name.
    """
    from absl import app, flags
    for module in modules:
        importlib.import_module(runs_as(module))
    app.define_help_flags()
    flag_values = flags.FLAGS
    result = {'': (sorted(flag_values), [])}
    for module in modules:
        before = set(flag_values)
        namespace = vars(sys.modules[runs_as(module)])
        for statement in main_block_statements(module):
            exec(compile(ast.Module([statement], []), module_file(module), 'exec'), namespace)
        own = sorted(set(flag_values) - before)
        booleans = [name for name in own if flag_values[name].boolean]
        result[module] = (own, booleans)
        for name in own:
            delattr(flag_values, name)
    return result


@pytest.fixture(scope='module')
def commands():
    found = doc_commands()
    assert any(command.run_sh_name == 'trainer' for command in found), 'no commands found'
    return found


@pytest.fixture(scope='module')
def accepted_flags(commands):
    """{module: the flags it accepts, noNAME for booleans included}, and under '' the flags
    every command accepts; found in a fresh process."""
    modules = sorted({command.module for command in commands if module_file(command.module)}
                     | set(PASSES_UNKNOWN_FLAGS_TO.values())
                     | set(FLAGS_AFTER_DOUBLE_DASH_GO_TO.values()))
    code = ('import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]; import '
            'test_docs; print(json.dumps(test_docs.flags_each_module_defines(sys.argv[2:])))')
    result = subprocess.run([sys.executable, '-c', code, REPO, *modules], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    by_module = json.loads(result.stdout.strip().splitlines()[-1])
    general = set(by_module.pop('')[0]) | ABSL_PARSER_FLAGS
    accepted = {module: set(own) | {f'no{name}' for name in booleans} | general
                for module, (own, booleans) in by_module.items()}
    for module, target in PASSES_UNKNOWN_FLAGS_TO.items():
        if module in accepted:
            accepted[module] |= accepted[target]
    return {'': general, **accepted}


def test_every_command_exists(commands):
    run_sh = run_sh_modules()
    missing = [command for command in commands
               if (command.run_sh_name and command.run_sh_name not in run_sh)
               or (command.module not in NOT_OURS and not module_file(command.module))]
    assert not missing, f'commands that run.sh or the tree does not have: {missing}'


def test_every_flag_is_defined_by_its_command(commands, accepted_flags):
    unknown = [f'--{name} ({module}) in {command!r}'
               for command in commands if command.module in accepted_flags
               for name, module in command.flag_uses() if name not in accepted_flags[module]]
    assert not unknown, 'flags no command defines:\n' + '\n'.join(unknown)


def test_every_command_defines_flags(accepted_flags):
    """A command whose definitions were missed would accept only the general flags."""
    general = accepted_flags['']
    assert all(accepted - general for module, accepted in accepted_flags.items() if module)
    assert {'model_dir', 'train_steps', 'noaugment', 'flagfile'} <= accepted_flags['trainer.main']


def tracked_top_level_names():
    """The repo's own top-level files and folders (not data/, runs/... that commands create)."""
    listed = subprocess.run(['git', 'ls-files'], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    return {path.split('/', 1)[0] for path in listed.splitlines()}


def repo_paths(command, top_level):
    """The words of a command that name a file or folder of the repo (recipes/x.flags...)."""
    return [value for value in command.values()
            if value.split('/', 1)[0] in top_level and value not in ('.', '..')]


def test_every_repo_path_a_command_names_exists(commands):
    top_level = tracked_top_level_names()
    missing = [f'{path} in {command!r}' for command in commands
               for path in repo_paths(command, top_level)
               if not glob.glob(os.path.join(REPO, path))]
    assert not missing, 'paths that do not exist:\n' + '\n'.join(missing)


def prose_paths(top_level):
    """(doc, path) for each repo path the prose names in code: `trainer/run/experiment.py`, and
    in the README's layout table, each `module.py` of a row's folder."""
    for doc in DOC_FILES:
        prose = FENCE.sub('', read(doc))
        for span in INLINE_CODE.findall(prose):
            for word in span.split():
                path = word.strip('[](),;:')
                stems = [os.path.splitext(part)[0] for part in path.split('/')[1:]]
                if ('/' in path and path.split('/', 1)[0] in top_level
                        and not any(stem.isupper() for stem in stems)):  # models/NAME.py
                    yield doc, path
    for folder, cells in re.findall(r'^\| `([\w/]+/)` \|(.*)\|$', read('README.md'), re.MULTILINE):
        for name in re.findall(r'`([\w/]+\.(?:py|flags))`', cells):
            yield 'README.md', folder + name


def test_every_repo_path_the_prose_names_exists():
    missing = [f'{doc}: {path}' for doc, path in prose_paths(tracked_top_level_names())
               if not glob.glob(os.path.join(REPO, path))]
    assert not missing, 'paths that do not exist:\n' + '\n'.join(missing)


def heading_anchors(markdown):
    """GitHub's anchors for a page's headings: lowercase, punctuation dropped, spaces to -,
    and -1, -2... after a repeated one."""
    anchors, seen = [], {}
    for heading in re.findall(r'^#+ (.*)$', FENCE.sub('', markdown), re.MULTILINE):
        anchor = re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')
        anchors.append(f'{anchor}-{seen[anchor]}' if seen.get(anchor) else anchor)
        seen[anchor] = seen.get(anchor, 0) + 1
    return anchors


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for doc in DOC_FILES:
        for target in re.findall(r'\]\(([^)\s]+)\)', FENCE.sub('', read(doc))):
            if re.match(r'[a-z]+:', target):  # https:, mailto:
                continue
            path, _, anchor = target.partition('#')
            file = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(os.path.join(REPO, file)):
                broken.append(f'{doc}: {target} (no {file})')
            elif anchor and anchor not in heading_anchors(read(file)):
                broken.append(f'{doc}: {target} (no heading #{anchor} in {file})')
    assert not broken, 'broken links:\n' + '\n'.join(broken)


def marked_block_commands(doc, marker):
    """The commands of the fenced block that follows marker in doc, in order."""
    text = read(doc)
    start = text.index(marker)
    block = FENCE.search(text, start)
    assert block and not text[start:block.start()].count('\n') > 1, \
        f'{doc}: the fenced block must follow {marker} directly'
    found = [command for command in doc_commands() if command.doc == doc
             and command.text in block.group(1).replace('\\\n', ' ').splitlines()]
    assert found, f'{doc}: the block after {marker} holds no commands'
    return found


def quick_start_commands():
    """The README's quick-start block: its commands, in order."""
    return marked_block_commands('README.md', QUICK_START_MARKER)


def run_block(commands, tmp_path):
    """Runs a doc's block, command by command, in a temporary folder (its relative paths land
    there; the repo files it names are copied in), training only a few steps; the commands
    with their stdout."""
    training = [command for command in commands if '--mode=train' in command.args]
    assert training and any(arg.startswith('--train_steps=') for arg in training[0].args), \
        'the block trains with --train_steps, so that this test can shorten it'
    top_level = tracked_top_level_names()
    for path in (path for command in commands for path in repo_paths(command, top_level)):
        os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
        if os.path.isdir(os.path.join(REPO, path)):  # a --usr_dir folder
            shutil.copytree(os.path.join(REPO, path), tmp_path / path, dirs_exist_ok=True)
        else:
            shutil.copy(os.path.join(REPO, path), tmp_path / path)
    outputs = []
    for command in commands:
        args = [re.sub(r'^--train_steps=\d+$', f'--train_steps={QUICK_START_TRAIN_STEPS}', arg)
                for arg in command.args]
        result = subprocess.run([sys.executable, '-m', command.module, *args], cwd=tmp_path,
                                env=dict(os.environ, PYTHONPATH=REPO), capture_output=True,
                                text=True, timeout=180)
        assert result.returncode == 0, \
            f'{command!r} exited {result.returncode}:\n{result.stderr[-3000:]}'
        outputs.append((command, result.stdout))
    return outputs


@pytest.mark.slow  # the README's tour, each command a process: ./run.sh test-slow
def test_quick_start_runs(tmp_path):
    """The tour, step by step as the README gives it, training only a few steps."""
    outputs = run_block(quick_start_commands(), tmp_path)
    predictions = [json.loads(line) for command, stdout in outputs
                   if '--mode=predict' in command.args for line in stdout.splitlines()]
    assert predictions and all(prediction['classes'] in range(10) for prediction in predictions)
    status = [stdout for command, stdout in outputs if command.module == 'trainer.observe.status']
    steps = f'{QUICK_START_TRAIN_STEPS}/{QUICK_START_TRAIN_STEPS}'
    assert status and f'step {steps} (100%), finished' in status[0]


def documented_answers(model, export_dir):
    """serving.md's REST bodies for model (one predict, one classify) run through the best
    export under export_dir, as {verb: the signature's outputs}."""
    from test_serving import documented_requests, run_rest_body
    best = (export_dir / 'best').read_text().strip()
    bodies = {verb: body for name, verb, body in documented_requests() if name == model}
    assert sorted(bodies) == ['classify', 'predict']
    return {verb: run_rest_body(str(export_dir / best), verb, body) for verb, body in bodies.items()}


def predictions_printed(outputs):
    return [json.loads(line) for command, stdout in outputs
            if '--mode=predict' in command.args for line in stdout.splitlines()]


@pytest.mark.slow  # each command a process: ./run.sh test-slow
def test_your_data_tables_block_runs(tmp_path):
    """docs/your-data.md's table block, then serving.md's REST bodies for its model through the
    export it made."""
    outputs = run_block(marked_block_commands('docs/your-data.md', TABLES_MARKER), tmp_path)
    predictions = predictions_printed(outputs)
    assert len(predictions) == 200
    assert {prediction['classes'] for prediction in predictions} <= {'<=50K', '>50K'}
    answers = documented_answers('dnn_classifier', tmp_path / 'exports' / 'people')
    assert answers['classify']['scores'].shape == answers['predict']['probabilities'].shape == (2, 2)


@pytest.mark.slow  # each command a process: ./run.sh test-slow
def test_your_data_images_block_runs(tmp_path):
    """docs/your-data.md's image-folder block, then serving.md's REST bodies for its model
    through the export it made."""
    from demos.digit_photos import NAMES
    outputs = run_block(marked_block_commands('docs/your-data.md', IMAGES_MARKER), tmp_path)
    [prediction] = predictions_printed(outputs)
    assert prediction['image'] == 'docs/seven.png' and prediction['class_name'] in NAMES
    assert prediction['score'] == max(prediction['probabilities'])
    answers = documented_answers('image_classifier', tmp_path / 'exports' / 'digit_photos')
    names = answers['classify']['classes'].numpy().tolist()
    assert names == [[name.encode() for name in sorted(NAMES)]]
    assert answers['predict']['class_name'].numpy()[0].decode() in NAMES


@pytest.mark.slow  # each command a process: ./run.sh test-slow
def test_your_model_keras_and_warm_start_blocks_run(tmp_path):
    """docs/your-model.md's Keras model, then its fine-tuning onto three classes warm-started from
    it (the head left out), in one folder."""
    import tensorflow as tf
    outputs = run_block(marked_block_commands('docs/your-model.md', KERAS_MARKER), tmp_path)
    [prediction] = predictions_printed(outputs)
    assert prediction['image'] == 'docs/seven.png' and prediction['classes'] in range(10)
    outputs = run_block(marked_block_commands('docs/your-model.md', WARM_START_MARKER), tmp_path)
    results = [json.loads(line) for command, stdout in outputs if '--mode=evaluate' in command.args
               for line in stdout.splitlines()]
    assert [result['global_step'] for result in results] == [0, int(QUICK_START_TRAIN_STEPS)]
    source = tf.train.latest_checkpoint(str(tmp_path / 'runs' / 'keras_cnn'))
    fine_tuned = str(tmp_path / 'runs' / 'three_digits' / 'model.ckpt-0')
    assert (tf.train.load_variable(fine_tuned, 'conv2d/kernel')
            == tf.train.load_variable(source, 'conv2d/kernel')).all()
    assert tf.train.load_variable(fine_tuned, 'logits/kernel').shape[-1] == 3
