"""Every operation of the OpenAPI document under /v1, walked with no key, with a key holding
every action but those the route takes, and with one holding exactly those: 401, 403, and
neither (a route any key may use: no key, then a key of each action). A route added without its
actions fails here (and in test_keys.py)."""

from __future__ import annotations

import re
from typing import Any

from cari.keys import ACTIONS
from tests.conftest import app_client

# A value for each path parameter the document names: enough to reach the route's guard.
PATH_VALUES = {
    "collection": "faq",
    "document_id": "x",
    "sku": "x",
    "key_id": "cari_00000000",
}


def test_every_operation_answers_401_403_or_passes_by_its_actions(dsn: str) -> None:
    with app_client(dsn, key_cache_ttl_s=0) as client:
        needs: dict[tuple[str, str], frozenset[str]] = {}
        for route in client.app.routes:
            for handler in getattr(route, "route_handlers", []):
                for method in handler.http_methods:
                    if "actions" in handler.opt:
                        needs[(method, route.path_format)] = handler.opt["actions"]

        def key(actions: list[str]) -> dict[str, str]:
            created = client.post(
                "/v1/keys",
                json={"name": "k", "actions": actions, "collections": ["*"]},
                headers=admin,
            )
            assert created.status_code == 201, created.text
            return {"Authorization": f"Bearer {created.json()['secret']}"}

        first = client.post(
            "/v1/keys", json={"name": "admin", "actions": list(ACTIONS), "collections": ["*"]}
        )
        admin = {"Authorization": f"Bearer {first.json()['secret']}"}
        document = client.get("/docs/openapi.json").json()
        walked = 0
        for path, item in document["paths"].items():
            if not path.startswith("/v1"):
                continue
            url = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], path)
            for method in item:
                needed = needs[(method.upper(), path)]
                others = [a for a in ACTIONS if a not in needed]
                body: dict[str, Any] = {"json": {}} if method in ("post", "put", "patch") else {}
                anonymous = client.request(method, url, **body)
                assert anonymous.status_code == 401, (method, path)
                if others:
                    refused = client.request(method, url, headers=key(others), **body)
                    assert refused.status_code == 403, (method, path, refused.text)
                    assert refused.json()["code"] == "forbidden"
                    holders = [sorted(needed)]
                else:  # a route any key may use (/v1/access): each key of one action passes
                    holders = [[action] for action in ACTIONS]
                for actions in holders:
                    allowed = client.request(method, url, headers=key(actions), **body)
                    assert allowed.status_code not in (401, 403), (method, path, allowed.text)
                walked += 1
        assert walked == len([p for p in needs if p[1].startswith("/v1")])
