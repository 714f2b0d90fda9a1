"""Alert notifications: receivers (generic JSON, Alertmanager v4, Slack webhooks; Alertmanager's own API),
and a SQLite outbox delivered at least once with backoff, surviving restarts."""

from gpuwatch.notify.delivery import Deliverer, Target
from gpuwatch.notify.notifier import Notifier
from gpuwatch.notify.outbox import Outbox
from gpuwatch.notify.signing import Secret, SecretError, load_secret, new_secret, parse_secret, verify

__all__ = ["Deliverer", "Notifier", "Outbox", "Secret", "SecretError", "Target", "load_secret", "new_secret",
           "parse_secret", "verify"]
