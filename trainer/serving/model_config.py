"""EXPORT_DIR/models.config: TF Serving's ModelServerConfig, pinning the version an eval job chose.

Given only --model_base_path=EXPORT_DIR, TF Serving serves the highest version there: the
newest step, which need not be the best. An eval job with --export_policy=best writes this
text proto (model_version_policy { specific { versions: STEP } }, base path EXPORT_DIR) and
rewrites it whole when the best changes; `tensorflow_model_server
--model_config_file=EXPORT_DIR/models.config --model_config_file_poll_wait_seconds=60` reads
it again every minute (docs/serving.md).
"""
import os
from typing import Optional

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from common import atomic_writes, files, paths

CONFIG_FILE = 'models.config'


def config_path(export_dir: str) -> str:
    return paths.join(export_dir, CONFIG_FILE)


def base_path(export_dir: str) -> str:
    """EXPORT_DIR as TF Serving needs it: an absolute path, or the bucket URL."""
    if paths.is_local(export_dir):
        return os.path.abspath(paths.local_path(export_dir))
    return export_dir.rstrip('/')


def config_text(model_name: str, export_dir: str, step: int) -> str:
    """The ModelServerConfig that serves version `step` of EXPORT_DIR as model_name."""
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = model_name
    model.base_path = base_path(export_dir)
    model.model_platform = 'tensorflow'
    model.model_version_policy.specific.versions.append(step)
    return text_format.MessageToString(config)


def pinned_version(export_dir: str) -> Optional[int]:
    """The one version EXPORT_DIR/models.config pins; None without such a file."""
    path = config_path(export_dir)
    if not files.exists(path):
        return None
    try:
        config = text_format.Parse(files.read_text(path), model_server_config_pb2.ModelServerConfig())
    except text_format.ParseError:
        return None  # not ours any more: rewritten whole by write()
    versions = [version for model in config.model_config_list.config
                for version in model.model_version_policy.specific.versions]
    return versions[0] if len(versions) == 1 else None


def write(export_dir: str, model_name: str, step: int) -> bool:
    """Pins version `step`, replacing the file whole; False when it already said so."""
    path, text = config_path(export_dir), config_text(model_name, export_dir, step)
    if files.exists(path) and files.read_text(path) == text:
        return False
    atomic_writes.write_text_atomic(path, text)
    return True
