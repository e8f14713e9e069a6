"""What a user's file pattern means: the shards a --train_files or --eval_files glob names (not
the manifest.json beside them; a folder named for its files gets the globs of its splits), a
prepare command's --source files, and the data schema in the manifest beside a pattern."""
import fnmatch
import os
import re
from typing import Dict, Iterable, List, Tuple

from common import files, paths
from common.errors import UserError
from input_fns.records.shards import MANIFEST_NAME, read_manifest

# What prepares data of each schema kind, for messages.
PREPARED_BY = {'table': '`prepare csv` or `prepare examples`', 'images': '`prepare images`'}


def split_patterns(value: str) -> List[str]:
    """A flag's glob, or its comma-separated globs (`\\,` is a comma in a path)."""
    patterns = (part.strip().replace('\\,', ',') for part in re.split(r'(?<!\\),', value))
    return [pattern for pattern in patterns if pattern]


def data_files(matched: Iterable[str]) -> List[str]:
    """A glob's matches less the manifests: `--train_files='data/*'` means the records, not the
    manifest.json prepare wrote beside them (which would match only from the second run on)."""
    return [path for path in matched if os.path.basename(path) != MANIFEST_NAME]


def source_files(source: str, what: str, folder_glob: str) -> List[str]:
    """A prepare command's --source glob: the files it matches, less manifests, sorted. A
    folder is refused with the glob of its files (it would be opened as a file)."""
    if source and _literal_folder(source):
        raise UserError(f"--source={source}: a folder; give a glob of its files: "
                        f"--source='{paths.join(source.rstrip('/') or '/', folder_glob)}'")
    matched = sorted(data_files(files.glob(source))) if source else []
    if not matched:
        raise UserError(f'--source={source}: no such file; give {what}')
    return matched


def _literal_folder(pattern: str) -> bool:
    """A pattern without wildcards that names a folder (given where its files are meant)."""
    return not files.is_glob(pattern) and files.isdir(pattern)


def check_not_a_folder(file_pattern: str, flag_name: str) -> None:
    """A folder given where its files are meant (--train_files=data/mnist) would be read as a
    file or looked for beside itself: name the globs of its splits instead."""
    if not _literal_folder(file_pattern):
        return
    folder = file_pattern.rstrip('/') or '/'
    try:
        splits = read_manifest(folder).get('splits', {})
    except (ValueError, OSError):
        splits = {}
    globs = [f"{flag_name}='{paths.join(folder, split)}-*' ({split})" for split, entry in
             sorted(splits.items())
             if all(s['file'].startswith(f'{split}-') for s in entry.get('shards', []))]
    if not globs and len(splits) == 1:  # records read in place keep their own names
        globs = [f"{flag_name}='{paths.join(folder, '*')}'"]
    if globs:
        which = 'the files of one of its splits' if len(globs) > 1 else 'its files'
        raise UserError(f'{flag_name}={file_pattern}: a folder; give {which}: '
                        f'{", or ".join(globs)}')
    raise UserError(f'{flag_name}={file_pattern}: a folder, with no manifest.json of prepared '
                    'shards; write shards with `python -m input_fns.prepare` and give '
                    f'{flag_name} a glob of them')


# What a model built from a schema of images depends on (their manifests differ in the rest:
# counts, the source folder); one built from a table depends on its every statistic.
_IMAGE_MODEL_KEYS = ('classes', 'image_shape', 'resize')


def _as_a_model_sees(schema: Dict) -> Dict:
    if schema['kind'] == 'images':
        return {key: schema.get(key) for key in _IMAGE_MODEL_KEYS}
    return {key: value for key, value in schema.items() if key != 'source'}


def read_schema(value: str, flag_name: str) -> Dict:
    """The schema in the manifest.json beside the files of value (a flag's glob, or globs):
    one model is built from it, so globs in folders prepared apart must agree on it."""
    (first, manifest), *others = read_prepared_manifests(value, flag_name)
    for pattern, theirs in others:
        if _as_a_model_sees(theirs['schema']) != _as_a_model_sees(manifest['schema']):
            raise UserError(f'{flag_name}: {first} and {pattern} were prepared apart, each with '
                            f'a schema of its own ({manifest_path(first)}, '
                            f'{manifest_path(pattern)}), and one model is built from one: prepare '
                            'their sources in one run (one --source glob), or give '
                            f'{flag_name} the files of one of them')
    return manifest['schema']


def manifest_path(file_pattern: str) -> str:
    return paths.join(os.path.dirname(file_pattern) or '.', MANIFEST_NAME)


def read_prepared_manifests(value: str, flag_name: str) -> List[Tuple[str, Dict]]:
    """(glob, the manifest beside its files) for each of value's globs whose folder's manifest
    is not already among them."""
    manifests = {}
    for pattern in split_patterns(value):
        if manifest_path(pattern) not in manifests:
            manifests[manifest_path(pattern)] = (pattern,
                                                 read_prepared_manifest(pattern, flag_name))
    return list(manifests.values())


def read_prepared_manifest(file_pattern: str, flag_name: str) -> Dict:
    """The manifest.json beside the files of file_pattern (a flag's value), which has a schema."""
    check_not_a_folder(file_pattern, flag_name)
    path = manifest_path(file_pattern)
    what_to_do = ('prepare the data with `prepare csv`, `prepare examples` or `prepare images`, '
                  f'and give {flag_name} its shards')
    if not files.exists(path):
        raise UserError(f'{flag_name}={file_pattern}: no {path}; {what_to_do}')
    manifest = files.read_json(path)
    schema = manifest.get('schema')
    if not isinstance(schema, dict) or not schema.get('kind'):
        raise UserError(f'{path}: no data schema in it ({flag_name}={file_pattern}); {what_to_do}')
    return manifest


def matched_splits(file_pattern: str, manifest: Dict) -> List[Dict]:
    """The entries of manifest (read_prepared_manifest's) for the splits that have a file
    file_pattern matches."""
    name_glob = os.path.basename(file_pattern)
    return [entry for entry in manifest.get('splits', {}).values()
            if any(fnmatch.fnmatchcase(shard['file'], name_glob) for shard in entry['shards'])]


def schema_at(schema_from: str, kind: str) -> Dict:
    """--schema_from: the schema of prepared shards (their folder or manifest.json), of kind."""
    path = (schema_from if schema_from.endswith('.json') else
            paths.join(schema_from, MANIFEST_NAME))
    schema = (files.read_json(path) if files.exists(path) else {}).get('schema') or {}
    if schema.get('kind') != kind:
        raise UserError(f'--schema_from={schema_from}: {path} holds no {kind} schema; give the '
                        f'folder of shards that {PREPARED_BY[kind]} wrote')
    return schema
