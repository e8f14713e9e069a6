"""Names to objects, filled by modules that register themselves when they are imported."""
import importlib
from typing import Dict, Generic, List, Sequence, TypeVar

Item = TypeVar('Item')


class Registry(Generic[Item]):
    def __init__(self, what: str, modules: Sequence[str]):
        self._what = what  # 'model', 'input kind': for messages
        self._modules = modules  # imported on first lookup; each registers what it defines
        self._items: Dict[str, Item] = {}

    def register(self, name: str, item: Item) -> Item:
        if name in self._items:
            raise ValueError(f'{self._what} {name!r} is registered twice')
        self._items[name] = item
        return item

    def names(self) -> List[str]:
        self._load_all()
        return sorted(self._items)

    def get(self, name: str) -> Item:
        self._load_all()
        if name not in self._items:
            raise KeyError(f'unknown {self._what} {name!r}; registered: {", ".join(self.names())}')
        return self._items[name]

    def _load_all(self) -> None:
        for module in self._modules:
            importlib.import_module(module)
