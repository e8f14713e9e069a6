"""benchmarks/settings_ab.py: what a variant may say, and one turn's figures."""
import pytest

from benchmarks import settings_ab
from common.errors import UserError


def test_a_variant_is_settings_and_environment_variables():
    assert settings_ab.parse_variant('precision=mixed_bfloat16 xla=true batch_size=200 '
                                     'TF_MKL_OPTIMIZE_PRIMITIVE_MEMUSE=false') == (
        {'precision': 'mixed_bfloat16', 'xla': True, 'batch_size': 200},
        {'TF_MKL_OPTIMIZE_PRIMITIVE_MEMUSE': 'false'})


@pytest.mark.parametrize('variant, says', [('batch=3', "'batch' is neither"),
                                           ('batch_size=many', 'wants a number'),
                                           ('precision', 'is not NAME=VALUE')])
def test_a_bad_variant_is_one_line(variant, says):
    with pytest.raises(UserError, match=says):
        settings_ab.parse_variant(variant)
