"""The train/validation split of prepared data: by a hash of each example's key, not by position.

Hashing a stable key (a CSV row's bytes, an image's path below its root) puts each example in
the same split every time the data is prepared, and adding examples moves none of the old ones.
"""
import hashlib
from typing import Sequence

import numpy as np

from common.errors import UserError


def is_validation(key: bytes, validation_fraction: float) -> bool:
    """Whether the example with this key belongs to the validation split."""
    digest = hashlib.sha256(key).digest()
    return int.from_bytes(digest[:8], 'big') / 2.0 ** 64 < validation_fraction


def validation_mask(keys: Sequence[bytes], validation_fraction: float) -> np.ndarray:
    """is_validation of each key, the comparisons at once (uint64 to float64 rounds as
    Python's int to float does)."""
    if not validation_fraction:
        return np.zeros(len(keys), bool)
    digests = b''.join([hashlib.sha256(key).digest() for key in keys])
    firsts = np.frombuffer(digests, '>u8').reshape(-1, 4)[:, 0]
    return firsts.astype(np.float64) / 2.0 ** 64 < validation_fraction


def check_fraction(value: float, flag_name: str = '--validation_fraction') -> float:
    if not 0 <= value < 1:
        raise UserError(f'{flag_name}={value}: give the share of examples to hold out, '
                        'at least 0 and below 1 (e.g. 0.2)')
    return value
