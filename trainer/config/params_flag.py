"""--model_params: any of a model's params from the command line or a flagfile.

'similarity_scale=40,zoom_views=[1.1,1.2]' overrides those two of the model's DEFAULT_PARAMS;
each value is read as the type of the param's default (a list as a tuple of its elements'
type), so a recipe's flagfile can carry what its model was trained with.
"""
import re
from typing import Dict

from common.errors import UserError

_ASSIGNMENT = re.compile(r'\s*([A-Za-z_]\w*)\s*=\s*(\[[^\]]*\]|[^,\[\]]*)\s*(?:,|$)')


def parse(text: str, defaults: Dict, model: str, source: str = '--model_params') -> Dict:
    """'name=value,...' -> {name: typed value}; a UserError names source and the bad part."""
    params, position = {}, 0
    text = (text or '').strip()
    while position < len(text):
        match = _ASSIGNMENT.match(text, position)
        if not match:
            raise UserError(f'{source}: cannot read {text[position:]!r}; write name=value,'
                            f'name=[a,b] (for example similarity_scale=40,zoom_views=[1.1,1.2])')
        name, value = match.groups()
        if name not in defaults:
            raise UserError(f'{source}: {model} has no param {name!r}; its params: '
                            f'{", ".join(sorted(defaults))}')
        if name in params:
            raise UserError(f'{source}: {name} is given twice; give it once')
        params[name] = typed(value.strip(), defaults[name], f'{source}: {name}={value.strip()}')
        position = match.end()
    return params


def typed(value: str, default, where: str):
    """value read as the type of default; a UserError that starts with where if it cannot be."""
    if isinstance(default, (tuple, list)):
        if not (value.startswith('[') and value.endswith(']')):
            raise UserError(f'{where}: a list is written in brackets, for example [1.1,1.2]')
        items = [item.strip() for item in value[1:-1].split(',') if item.strip()]
        element = default[0] if default else 0.0
        return tuple(typed(item, element, where) for item in items)
    if isinstance(default, bool):
        if value.lower() not in ('true', 'false'):
            raise UserError(f'{where}: write true or false')
        return value.lower() == 'true'
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(value)
            except ValueError:
                raise UserError(f'{where} is not {"an integer" if kind is int else "a number"}'
                                ) from None
    return value
