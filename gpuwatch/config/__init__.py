"""The daemon's TOML config: typed sections, env overrides and validation with file:line errors."""

from gpuwatch.config.loader import ConfigError, check_listen, default_config_path, load_config, override
from gpuwatch.config.model import (
    DEFAULT_LISTEN,
    DEFAULT_PORT,
    AlertsConfig,
    Config,
    DaemonConfig,
    NotifyConfig,
    ReceiverConfig,
    SamplerConfig,
    SourcesConfig,
)

__all__ = ["DEFAULT_LISTEN", "DEFAULT_PORT", "AlertsConfig", "Config", "ConfigError", "DaemonConfig", "NotifyConfig",
           "ReceiverConfig", "SamplerConfig", "SourcesConfig", "check_listen", "default_config_path", "load_config",
           "override"]
