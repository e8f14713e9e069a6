"""Photos labelled by a CSV file rather than by class folders, as many downloaded data sets come:
ROOT/train/*.jpg beside labels.csv (`id,breed` a row; the id the file's path below ROOT, with
or without its extension). `prepare images --labels_file=labels.csv` reads it in place of the
class folders: the classes are the label column's values, sorted; every row must name one image
under ROOT, once; images under ROOT that no row names (a test set's, kept in the same folder)
are counted and listed, not trained on.
"""
import collections
import os
import posixpath
from typing import Dict, List, Optional

from common import file_trees, files
from common.errors import UserError
from input_fns.images import class_folders
from input_fns.tables import csv_files


class LabelledFiles:
    """The images a labels file names and their classes; the interface of ClassFolders
    (root, classes, folders: the classes found, images and labels, not_images)."""

    def __init__(self, root: str, labels_file: str, label: Optional[str],
                 trained_classes: Optional[List[str]] = None, encoding: Optional[str] = None):
        if not files.isdir(root):
            raise UserError(f'--source_dir={root}: no such folder; give the folder whose images '
                            f'--labels_file={labels_file} names')
        if not files.exists(labels_file):
            raise UserError(f'--labels_file={labels_file}: no such file; give the CSV that names '
                            'each image and its class')
        self.root, self.labels_file = root.rstrip('/'), labels_file
        self.skipped_because = f'{os.path.basename(labels_file)} does not name'
        found = file_trees.list_tree(self.root)
        by_name = _names_to_images(found)
        rows = csv_files.file_format(labels_file, encoding=encoding).rows(labels_file)
        header = [name.strip() for name in next(rows, (0, []))[1]]
        column = self._label_column(header, label)
        named: Dict[str, int] = {}  # image -> the line naming it
        images, names = [], []
        for line, fields in rows:
            if len(fields) != len(header):
                raise UserError(f'{labels_file} line {line}: {len(fields)} fields, but the header '
                                f'names {len(header)} columns; fix that row')
            name, value = fields[0].strip(), fields[column].strip()
            image = by_name.get(posixpath.normpath(name.replace('\\', '/')).lstrip('/'))
            if image is None:
                raise UserError(f'{labels_file} line {line}: no image {name!r} under {self.root} '
                                '(its path below that folder, with or without its extension); '
                                'fix the row or --source_dir')
            if image in named:
                raise UserError(f'{labels_file} lines {named[image]} and {line} both name '
                                f'{image}; keep one')
            if not value:
                raise UserError(f'{labels_file} line {line}: {image} has no label; give it one '
                                'or remove the row')
            named[image] = line
            images.append(image)
            names.append(value)
        self.classes = trained_classes or sorted(set(names))
        self._check_classes(names, trained_classes)
        order = sorted(range(len(images)), key=lambda index: images[index])
        self.images = [images[index] for index in order]
        self.labels = [self.classes.index(names[index]) for index in order]
        self.folders = sorted(set(names))  # the classes found, as ClassFolders names them
        self.not_images = sorted(set(found) - set(named))  # not named: not trained on

    def _label_column(self, header: List[str], label: Optional[str]) -> int:
        if label:
            if label not in header[1:]:
                raise UserError(f'--label={label}: {self.labels_file} has no such column after '
                                f'the first (the files); its columns: {", ".join(header)}')
            return header.index(label)
        if len(header) != 2:
            raise UserError(f'{self.labels_file}: {len(header)} columns ({", ".join(header)}); '
                            'give the file\'s path first and the class second, or pass --label '
                            'to name the class column')
        return 1

    def _check_classes(self, names: List[str], trained_classes: Optional[List[str]]) -> None:
        unknown = sorted(set(names) - set(self.classes))
        if unknown:
            raise UserError(f'{self.labels_file}: class {unknown[0]!r}, which the training data '
                            f'does not have (its classes: {", ".join(self.classes)}); fix the '
                            'rows of that class, or leave them out')
        if not trained_classes and len(self.classes) < 2:
            raise UserError(f'{self.labels_file}: {len(self.classes)} class; a classifier needs '
                            'two or more')

    def place_of(self, name: str) -> str:
        """Where a class's images are named, for messages."""
        return f'{self.labels_file}, class {name!r}'

    def not_images_by_extension(self) -> Dict[str, int]:
        return class_folders.count_by_extension(self.not_images)


def _names_to_images(found: List[str]) -> Dict[str, str]:
    """{a name a row may give: the image's path below ROOT}: the path, and the path without its
    extension where no other image shares it."""
    images = [path for path in found if path.lower().endswith(class_folders.IMAGE_EXTENSIONS)]
    stems = collections.Counter(os.path.splitext(path)[0] for path in images)
    return {**{os.path.splitext(path)[0]: path for path in images
               if stems[os.path.splitext(path)[0]] == 1},
            **{path: path for path in images}}
