"""The [backup] section of the INI configuration."""

import configparser
from dataclasses import dataclass


@dataclass(frozen=True)
class BackupConfig:
    source: str
    keep: int
    compress: bool


def load_config(text: str) -> BackupConfig:
    """The settings in the ``[backup]`` section of the INI ``text``; ``source`` is required."""
    parser = configparser.ConfigParser()
    parser.read_string(text)
    section = parser["backup"]
    return BackupConfig(
        source=section["source"],
        keep=section.getint("keep", fallback=7),
        compress=section.getboolean("compress", fallback=True),
    )
