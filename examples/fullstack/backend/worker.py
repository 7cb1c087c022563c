"""A background worker in the way Celery's behaves when it is stopped.

SIGTERM is Celery's warm shutdown: the worker finishes the task it has (here, 3 seconds of
work) before it exits. SIGQUIT is its cold shutdown: it exits at once. binky.toml gives the
worker `stop_signal = "SIGQUIT"`, so `binky down` and `binky remove` do not wait for it.
Between signals it would take tasks from the world's Redis (REDIS_URL); here it only sleeps.
"""

import signal
import sys
import time


def warm_shutdown(*_):
    time.sleep(3)  # the task in hand
    sys.exit(0)


def cold_shutdown(*_):
    sys.exit(0)


signal.signal(signal.SIGTERM, warm_shutdown)
signal.signal(signal.SIGQUIT, cold_shutdown)
print("worker ready", flush=True)
while True:
    time.sleep(1)
