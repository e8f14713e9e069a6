"""The train/validation split of prepared data: by a hash of each example's key, not by position.

Hashing a stable key (a CSV row's bytes, an image's path below its root) puts each example in
the same split every time the data is prepared, and adding examples moves none of the old ones.
"""
import hashlib
from typing import Optional, Sequence

import numpy as np

from common.errors import UserError


def is_validation(key: bytes, validation_fraction: float) -> bool:
    """Whether the example with this key belongs to the validation split."""
    digest = hashlib.sha256(key).digest()
    return int.from_bytes(digest[:8], 'big') / 2.0 ** 64 < validation_fraction


def digest_words(keys: Sequence[bytes]) -> np.ndarray:
    """Each key's SHA-256 as four big-endian uint64 words (rows x 4): the first decides its
    split (is_validation); the rest are there for other uses of the same hash, as a table row's
    shuffle key (input_fns/records/record_shuffle.py's seeded_keys)."""
    digests = b''.join([hashlib.sha256(key).digest() for key in keys])
    return np.frombuffer(digests, '>u8').reshape(-1, 4)


def validation_mask(keys: Sequence[bytes], validation_fraction: float,
                    words: Optional[np.ndarray] = None) -> np.ndarray:
    """is_validation of each key, the comparisons at once (uint64 to float64 rounds as
    Python's int to float does); words: the keys' digest_words, where already made."""
    if not validation_fraction:
        return np.zeros(len(keys), bool)
    firsts = (digest_words(keys) if words is None else words)[:, 0]
    return firsts.astype(np.float64) / 2.0 ** 64 < validation_fraction


def check_fraction(value: float, flag_name: str = '--validation_fraction') -> float:
    if not 0 <= value < 1:
        raise UserError(f'{flag_name}={value}: give the share of examples to hold out, '
                        'at least 0 and below 1 (e.g. 0.2)')
    return value
