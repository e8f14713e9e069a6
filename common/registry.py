"""Names to objects, filled by modules that register themselves when they are imported."""
import importlib
from typing import Dict, Generic, List, Sequence, TypeVar

from common.errors import UserError

Item = TypeVar('Item')


class Registry(Generic[Item]):
    def __init__(self, what: str, modules: Sequence[str]):
        self._what = what  # 'model', 'input kind': for messages
        self._modules = modules  # imported on first lookup; each registers what it defines
        self._items: Dict[str, Item] = {}
        self._owners: Dict[str, str] = {}  # name: the module that registered it

    def register(self, name: str, item: Item, module: str) -> Item:
        """module: the one registering it, named when another registers the same name."""
        if name in self._items:
            raise UserError(f'{module} registers {self._what} {name!r}, which '
                            f'{self._owners[name]} registered first; rename one of them')
        self._items[name] = item
        self._owners[name] = module
        return item

    def owner(self, name: str) -> str:
        """The module that registered name."""
        self.get(name)
        return self._owners[name]

    def names(self) -> List[str]:
        self._load_all()
        return sorted(self._items)

    def get(self, name: str) -> Item:
        self._load_all()
        if name not in self._items:
            raise UserError(f'unknown {self._what} {name!r}; registered: '
                            f'{", ".join(self.names())}; one of your own: add --usr_dir=FOLDER '
                            'of the modules that register it (docs/your-model.md)')
        return self._items[name]

    def _load_all(self) -> None:
        for module in self._modules:
            importlib.import_module(module)
