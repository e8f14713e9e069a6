"""The class folders `prepare images` reads (ROOT/<class>/[nested/]photo), as
tf.keras.utils.image_dataset_from_directory reads them: the classes, each one's image files,
and the files that are not images."""
import collections
import os
from typing import Dict, List, Optional

from common import file_trees, files, paths
from common.errors import UserError
from input_fns.images import converted_images

# image_dataset_from_directory's extensions, which tf.io.decode_image reads, and WebP.
IMAGE_EXTENSIONS = ('.bmp', '.gif', '.jpeg', '.jpg', '.png', *converted_images.EXTENSIONS)
# Folder names that mean a split of a downloaded data set (ROOT/train/cat), not a class.
SPLIT_FOLDER_NAMES = frozenset({'train', 'training', 'val', 'valid', 'validation', 'test',
                                'testing', 'eval', 'dev'})


class ClassFolders:
    """ROOT's class folders and the image files under each, with the files that are not images.
    trained_classes: the classes of the data a model was trained on (--schema_from), whose
    labels these folders keep; a folder of another class is refused, a missing one is fine."""

    def __init__(self, root: str, trained_classes: Optional[List[str]] = None):
        if not files.isdir(root):
            raise UserError(f'--source_dir={root}: no such folder; give the folder that holds '
                            'one sub-folder of images per class')
        self.root = root.rstrip('/')
        self.skipped_because = 'are not images'
        folders = [name for name in files.listdir(root) if files.isdir(paths.join(root, name))]
        unknown = sorted(set(folders) - set(trained_classes or folders))
        if unknown:
            raise UserError(f'{paths.join(root, unknown[0])}: a class the training data does not '
                            f'have (its classes: {", ".join(trained_classes)}); remove or rename '
                            'the folder')
        self.classes, self.folders = trained_classes or folders, folders
        _refuse_split_folders(root, folders)
        if len(folders) < (1 if trained_classes else 2):  # a held-out set may lack classes
            found = f'one class folder ({folders[0]})' if folders else 'no class folders'
            raise UserError(f'--source_dir={root}: {found}; a classifier needs two or more: put '
                            'each class\'s images in a sub-folder named after it (ROOT/cat/1.jpg, '
                            'ROOT/dog/2.png)')
        self.images: List[str] = []  # paths relative to ROOT, 'class/.../name.png'
        self.labels: List[int] = []
        self.not_images: List[str] = []
        for label, name in enumerate(self.classes):
            if name not in folders:
                continue  # a held-out set may lack a class
            found = [f'{name}/{relative}'
                     for relative in file_trees.list_tree(paths.join(root, name))]
            images = [path for path in found if path.lower().endswith(IMAGE_EXTENSIONS)]
            if not images:
                raise UserError(f'{paths.join(root, name)}: no images in this class folder '
                                f'({converted_images.FORMATS}); add some, or remove the folder')
            self.images += images
            self.labels += [label] * len(images)
            self.not_images += sorted(set(found) - set(images))

    def place_of(self, name: str) -> str:
        """Where a class's images are, for messages."""
        return paths.join(self.root, name)

    def not_images_by_extension(self) -> Dict[str, int]:
        return count_by_extension(self.not_images)


def count_by_extension(paths: List[str]) -> Dict[str, int]:
    """{'.txt': 2, '(none)': 1}: how many of the paths end in each extension."""
    return dict(sorted(collections.Counter(
        os.path.splitext(path)[1].lower() or '(none)' for path in paths).items()))


def _refuse_split_folders(root: str, folders: List[str]) -> None:
    """ROOT/train/cat and ROOT/test/cat read as the classes 'test' and 'train' would train a
    model to tell the splits apart."""
    if folders and all(name.lower() in SPLIT_FOLDER_NAMES for name in folders):
        first = next((name for name in sorted(folders) if name.lower().startswith('train')),
                     sorted(folders)[0])
        raise UserError(f'--source_dir={root}: its folders ({", ".join(sorted(folders))}) are '
                        'splits, not classes; give the training split\'s folder of class '
                        f'folders (--source_dir={paths.join(root, first)}), then prepare each '
                        'other one with --schema_from=OUTPUT_DIR --split=NAME')
