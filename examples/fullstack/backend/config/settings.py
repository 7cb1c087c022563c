"""Settings for the notes backend.

Everything that differs between worlds comes from the environment binky sets:
DATABASE_URL (the world's own PostgreSQL database and role) and REDIS_URL (the
world's own Redis: its keys need no world-specific prefix).
"""
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-not-a-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
# `.localhost` matches every `api.<world>.fullstack.localhost` binky's proxy routes here.
ALLOWED_HOSTS = [".localhost", "localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "notes",
]
MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"


def database_from_url(url):
    """postgres://user:password@host:port/name -> a DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"DATABASE_URL must be a postgres:// URL, got {parts.scheme}://")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "localhost",
        "PORT": str(parts.port or 5432),
        "CONN_MAX_AGE": 60,
    }


# makemigrations needs no database; everything else does.
DATABASES = {
    "default": database_from_url(os.environ.get("DATABASE_URL", "postgres://localhost/notes"))
}
REDIS_URL = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
CACHE_PREFIX = os.environ.get("CACHE_PREFIX", "notes:")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
