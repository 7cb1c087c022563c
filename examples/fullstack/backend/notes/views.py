from functools import lru_cache

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from .models import Note


@lru_cache(maxsize=1)
def cache():
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)


def hits_key():
    # The world's Redis user may only touch keys under its own prefix.
    return f"{settings.CACHE_PREFIX}hits:notes"


@require_GET
def health(request):
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
    cache().ping()
    return JsonResponse({"ok": True})


@require_GET
def notes(request):
    rows = [
        {
            "id": n.id,
            "title": n.title,
            "body": n.body,
            "pinned": n.pinned,
            "created_at": n.created_at.isoformat(),
        }
        for n in Note.objects.all()
    ]
    hits = cache().incr(hits_key())
    return JsonResponse({"database": connection.settings_dict["NAME"], "hits": hits, "notes": rows})
