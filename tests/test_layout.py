"""The tree keeps its shape: sizes that read on one screen, imports that follow the layers,
and one home for TF_CONFIG and for "is this path a bucket?" (docs/architecture.md)."""
import ast
import os
import pathlib
import subprocess
import sys
import warnings

REPO = pathlib.Path(__file__).resolve().parent.parent
SERVICE_PACKAGES = ('common', 'features', 'input_fns', 'models', 'trainer')
# A module past this many lines is a warning that asks for a split by concept, not a cut at a
# line count: a concept is not split in two files by size alone.
MODULE_LINES_WARNING = 250
MAX_FUNCTION_LINES = 60
MAX_MAIN_LINES = 100
# What each service package may import of the others: common <- features <- input_fns, models
# <- trainer (features: what a table's columns mean, which input_fns and models both follow).
MAY_IMPORT = {'common': {'common'}, 'features': {'common', 'features'},
              'input_fns': {'common', 'features', 'input_fns'},
              'models': {'common', 'features', 'models'}, 'trainer': set(SERVICE_PACKAGES)}
NOT_SERVICE = ('benchmarks', 'demos', 'tools', 'tests')
# trainer/'s packages from the bottom up: each imports only those on lower rows and itself
# (docs/architecture.md); `deploy` is a command of its own, which no other package imports.
TRAINER_LAYERS = (
    ('model_dir', 'cluster'),  # the model_dir's records; what runs inside a task
    ('input_kinds',),
    ('usr_dir', 'api', 'serving'),  # the user's modules, and the surface they import
    ('config', 'evaluation'),
    ('deploy', 'observe'),
    ('run',),
    ('main',),
)
TRAINER_LAYER = {package: row for row, packages in enumerate(TRAINER_LAYERS)
                 for package in packages}
# input_fns/'s packages by kind of data, from the bottom up, each importing only those before it:
# the record core, tables, images (a labels file is a table), faces, and the prepare command.
INPUT_FNS_LAYERS = ('records', 'tables', 'images', 'faces', 'prepare')


def service_modules():
    return sorted(path for package in SERVICE_PACKAGES for path in (REPO / package).rglob('*.py'))


def imported_top_packages(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split('.')[0]


def test_the_service_tree_is_found():
    assert len(service_modules()) > 40  # a wrong REPO would make every other check vacuous


def long_module(path: pathlib.Path):
    lines = path.read_text().count('\n')
    return f'{path.relative_to(REPO)} ({lines} lines)' if lines > MODULE_LINES_WARNING else None


def too_long(path: pathlib.Path):
    """The functions of a module that are over the limit."""
    for node in ast.walk(ast.parse(path.read_text())):
        length = getattr(node, 'end_lineno', 0) - getattr(node, 'lineno', 0) + 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and length > MAX_FUNCTION_LINES:
            yield f'{path.relative_to(REPO)}: {node.name} ({length} lines)'


def test_function_sizes_and_long_modules():
    assert [found for path in service_modules() for found in too_long(path)] == []
    for long in filter(None, map(long_module, service_modules())):
        warnings.warn(f'{long}: split it by concept if it holds more than one')


def test_main_reads_on_one_screen():
    assert (REPO / 'trainer' / 'main.py').read_text().count('\n') <= MAX_MAIN_LINES


def layer_violations(path: pathlib.Path):
    package = path.relative_to(REPO).parts[0]
    imported = set(imported_top_packages(ast.parse(path.read_text())))
    allowed = MAY_IMPORT[package] | (imported - set(SERVICE_PACKAGES) - set(NOT_SERVICE))
    return sorted(f'{path.relative_to(REPO)} imports {name}' for name in imported - allowed)


def test_imports_follow_the_layers():
    """The service never imports benchmarks/demos/tools; common <- input_fns, models <- trainer."""
    assert [found for path in service_modules() for found in layer_violations(path)] == []


def trainer_package(path: pathlib.Path) -> str:
    """trainer/run/experiment.py -> 'run'; trainer/main.py -> 'main'."""
    parts = path.relative_to(REPO / 'trainer').parts
    return parts[0] if len(parts) > 1 else path.stem


def imported_subpackages(tree: ast.AST, top: str):
    """The packages of `top` a module imports: `from input_fns.tables import x` -> 'tables'."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == top:
            yield from (alias.name for alias in node.names)
            continue
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        yield from (name.split('.')[1] for name in names if name.startswith(f'{top}.'))


def trainer_layer_violations(path: pathlib.Path):
    own = trainer_package(path)
    found = []
    for imported in sorted(set(imported_subpackages(ast.parse(path.read_text()), 'trainer')) - {own}):
        if imported == 'deploy' or TRAINER_LAYER[imported] >= TRAINER_LAYER[own]:
            found.append(f'{path.relative_to(REPO)} imports trainer.{imported}')
    return found


def test_trainer_packages_import_only_the_layers_below():
    modules = [path for path in sorted((REPO / 'trainer').rglob('*.py'))
               if path != REPO / 'trainer' / '__init__.py']
    assert {trainer_package(path) for path in modules} == set(TRAINER_LAYER)
    assert [found for path in modules for found in trainer_layer_violations(path)] == []


def input_fns_layer_violations(path: pathlib.Path):
    """input_fns/'s packages import only those before them in INPUT_FNS_LAYERS; the package's
    own __init__ imports none of them; and nothing outside prepare/ imports the command."""
    parts = path.relative_to(REPO).parts
    own = parts[1] if parts[0] == 'input_fns' and len(parts) > 2 else None
    found = []
    for imported in sorted(set(imported_subpackages(ast.parse(path.read_text()), 'input_fns'))):
        if imported == own:
            continue
        if (imported == 'prepare' or parts[0] == 'input_fns' and
                (own is None or INPUT_FNS_LAYERS.index(imported) > INPUT_FNS_LAYERS.index(own))):
            found.append(f'{path.relative_to(REPO)} imports input_fns.{imported}')
    return found


def test_input_fns_packages_import_only_the_layers_below():
    packages = {path.parent.name for path in (REPO / 'input_fns').glob('*/__init__.py')}
    assert packages == set(INPUT_FNS_LAYERS)
    assert [path.name for path in (REPO / 'input_fns').glob('*.py')] == ['__init__.py']
    assert [found for path in service_modules() for found in input_fns_layer_violations(path)] == []


# models/'s packages from the bottom up, over the shared pieces (training, precision, ...) and
# under the model modules: the table models (the canned head among them), then the heads.
MODELS_LAYERS = ('tables', 'heads')


def models_layer_violations(path: pathlib.Path):
    """models.tables never imports models.heads; neither imports a model module (one that
    registers a model: MODEL_MODULES)."""
    from models.registry import MODEL_MODULES
    parts = path.relative_to(REPO).parts
    own = parts[1] if len(parts) > 2 else None
    if own is None:
        return []
    tree = ast.parse(path.read_text())
    imported = {f'models.{name}' for name in imported_subpackages(tree, 'models')}
    found = [name for name in imported if name in MODEL_MODULES and not name.startswith(f'models.{own}.')]
    found += [f'models.{name}' for name in MODELS_LAYERS[MODELS_LAYERS.index(own) + 1:]
              if f'models.{name}' in imported]
    return sorted(f'{path.relative_to(REPO)} imports {name}' for name in found)


def test_models_packages_import_only_the_layers_below():
    packages = {path.parent.name for path in (REPO / 'models').glob('*/__init__.py')}
    assert packages == set(MODELS_LAYERS)
    assert [found for path in sorted((REPO / 'models').rglob('*.py'))
            for found in models_layer_violations(path)] == []


def test_the_models_layer_check_finds_an_arrow_back_up(tmp_path, monkeypatch):
    """On a made-up tree: tables importing heads, and heads importing a model module."""
    for package in MODELS_LAYERS:
        (tmp_path / 'models' / package).mkdir(parents=True)
    (tmp_path / 'models' / 'tables' / 'up.py').write_text('from models.heads import table\n')
    (tmp_path / 'models' / 'heads' / 'up.py').write_text('from models import mnist_cnn, training\n')
    monkeypatch.setitem(globals(), 'REPO', tmp_path)
    assert models_layer_violations(tmp_path / 'models' / 'tables' / 'up.py') == [
        'models/tables/up.py imports models.heads']
    assert models_layer_violations(tmp_path / 'models' / 'heads' / 'up.py') == [
        'models/heads/up.py imports models.mnist_cnn']


def test_every_package_says_what_it_holds_and_may_import():
    packages = [path for path in service_modules() if path.name == '__init__.py']
    assert len(packages) > 15
    undescribed = [str(path.relative_to(REPO)) for path in packages
                   if 'import' not in (ast.get_docstring(ast.parse(path.read_text())) or '').lower()]
    assert undescribed == []


def test_one_reader_of_tf_config_and_one_bucket_predicate():
    reads_tf_config, asks_for_a_scheme = [], []
    for path in service_modules():
        text, name = path.read_text(), str(path.relative_to(REPO))
        if "environ.get('TF_CONFIG'" in text or "environ['TF_CONFIG']" in text:
            reads_tf_config.append(name)
        if "'://' in path" in text or "'://' not in path" in text:
            asks_for_a_scheme.append(name)
    assert reads_tf_config == ['common/tf_config.py']
    assert asks_for_a_scheme == ['common/paths.py']


def test_the_checks_find_what_they_look_for(tmp_path, monkeypatch):
    """On a made-up tree: a long function and an import of benchmarks/ are both reported."""
    (tmp_path / 'models').mkdir()
    module = tmp_path / 'models' / 'big.py'
    module.write_text('from benchmarks import baselines\nfrom trainer import main\n\n\ndef f():\n'
                      + '    x = 1\n' * MAX_FUNCTION_LINES)
    monkeypatch.setitem(globals(), 'REPO', tmp_path)
    assert list(too_long(module)) == [f'models/big.py: f ({MAX_FUNCTION_LINES + 1} lines)']
    assert layer_violations(module) == ['models/big.py imports benchmarks',
                                        'models/big.py imports trainer']


def test_the_trainer_layer_check_finds_an_arrow_back_up(tmp_path, monkeypatch):
    """On a made-up tree: model_dir importing run, and run importing deploy, are reported."""
    (tmp_path / 'trainer' / 'model_dir').mkdir(parents=True)
    (tmp_path / 'trainer' / 'run').mkdir()
    low = tmp_path / 'trainer' / 'model_dir' / 'records.py'
    low.write_text('from trainer.run import experiment\nfrom trainer.model_dir import ledger\n')
    high = tmp_path / 'trainer' / 'run' / 'runner.py'
    high.write_text('import trainer.deploy.job_specs\nfrom trainer.model_dir import ledger\n')
    monkeypatch.setitem(globals(), 'REPO', tmp_path)
    assert trainer_layer_violations(low) == ['trainer/model_dir/records.py imports trainer.run']
    assert trainer_layer_violations(high) == ['trainer/run/runner.py imports trainer.deploy']


def test_the_input_fns_layer_check_finds_an_arrow_back_up(tmp_path, monkeypatch):
    """On a made-up tree: records importing tables, and trainer importing the prepare command."""
    (tmp_path / 'input_fns' / 'records').mkdir(parents=True)
    (tmp_path / 'trainer').mkdir()
    low = tmp_path / 'input_fns' / 'records' / 'shards.py'
    low.write_text('from input_fns import tables\nfrom input_fns.records import split\n')
    outside = tmp_path / 'trainer' / 'main.py'
    outside.write_text('from input_fns.prepare import command\nimport input_fns.faces.lfw_files\n')
    monkeypatch.setitem(globals(), 'REPO', tmp_path)
    assert input_fns_layer_violations(low) == ['input_fns/records/shards.py imports input_fns.tables']
    assert input_fns_layer_violations(outside) == ['trainer/main.py imports input_fns.prepare']


def test_the_container_scenarios_command_imports_outside_pytest():
    """`./run.sh test-container` runs `python -m tests.containers.scenarios`, where tests/ is not on
    sys.path as pytest puts it there: what that imports of tests/ must import as `tests.NAME`."""
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    result = subprocess.run([sys.executable, '-m', 'tests.containers.scenarios', '--helpshort'],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
