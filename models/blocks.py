"""Per-block list params of the convolutional models (a number for each block of filters)."""
from common.errors import UserError


def per_block(params, name, default, blocks_param='conv_filters'):
    """The whole numbers of list param `name`, one per entry of list param `blocks_param`;
    empty: `default` for each."""
    blocks = len(params[blocks_param])
    values = params[name] or [default] * blocks
    if len(values) != blocks or any(value < 1 or value != int(value) for value in values):
        written = ','.join(f'{value:g}' for value in values)  # the list parses as floats
        raise UserError(f'--model_params: {name}=[{written}] must give a whole number, 1 or '
                        f'more, for each of the {blocks} blocks of {blocks_param}')
    return [int(value) for value in values]
