"""`cari keys` against a real `cari serve` (issue 65's walk-through): a search-only tenant key
for one collection pattern, created on the command line, used from the Python client (and
LangChain's retriever); it
cannot write, cannot reach another collection, sees its tenant's documents only, and is
refused once `cari keys revoke` has run (polled: within CARI_KEY_CACHE_TTL_S, 5 s)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from cari.client import (
    Client,
    CollectionCreate,
    DocumentIn,
    ForbiddenError,
    KeyCreate,
    NotFoundError,
    SearchRequest,
    UnauthorizedError,
)
from cari.langchain import CariRetriever
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_cli import serving
from tests.test_ingest_cli import cari

ADMIN = "admin-key"


def test_a_tenant_key_from_the_command_line_through_the_python_client(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = {**cli_env(clean_env, dsn, fake), "CARI_API_KEYS": ADMIN}
    created = cari(
        [
            "keys",
            "create",
            "acme storefront",
            "-a",
            "search",
            "-c",
            "shop-*",
            "--filter",
            '{"tenant": "acme"}',
        ],
        env,
    )
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    key_id = secret[: len("cari_") + 8]
    assert key_id in created.stderr and "search on shop-*" in created.stderr
    listed = cari(["keys", "list"], env)
    assert listed.returncode == 0 and key_id in listed.stdout and "active" in listed.stdout
    shown = cari(["keys", "show", key_id], env)
    assert json.loads(shown.stdout)["filter"] == {"tenant": "acme"}
    assert secret not in shown.stdout + listed.stdout

    output: list[str] = []
    served = {**env, "CARI_LOG_FORMAT": "json"}
    with serving(served, output=output) as url, Client(url, api_key=ADMIN) as admin:
        for name in ("shop-a", "faq"):
            admin.create_collection(CollectionCreate(name=name, language="english"))
        admin.add_documents(
            "shop-a",
            [
                DocumentIn(id=f"{tenant}/returns", text=text, metadata={"tenant": tenant})
                for tenant, text in (
                    ("acme", "Returns are accepted within 30 days."),
                    ("globex", "Returns are accepted within 14 days."),
                )
            ],
        )
        with Client(url, api_key=secret) as tenant:
            assert [c.name for c in tenant.list_collections()] == ["shop-a"]
            found = tenant.search_collection(
                "shop-a", SearchRequest(query="returns accepted", top_k=10)
            )
            assert [r.document_id for r in found.results] == ["acme/returns"]
            # LangChain's retriever with the key: the tenant's documents, no other.
            retriever = CariRetriever(
                base_url=url, collection="shop-a", api_key=secret, mode="keyword", k=10
            )
            retrieved = retriever.invoke("returns accepted")
            assert [d.metadata["document_id"] for d in retrieved] == ["acme/returns"]
            with pytest.raises(ForbiddenError) as cannot_write:
                tenant.add_documents("shop-a", [DocumentIn(id="acme/x", text="X.")])
            assert cannot_write.value.code == "forbidden"
            assert "documents:write" in cannot_write.value.detail
            with pytest.raises(ForbiddenError):
                tenant.search_collection("faq", SearchRequest(query="returns"))
            with pytest.raises(ForbiddenError):  # a search key reads no documents
                tenant.get_document("shop-a", "globex/returns")

            revoked = cari(["keys", "revoke", key_id], env)
            assert revoked.returncode == 0, revoked.stderr
            deadline = time.monotonic() + 60
            while True:
                try:
                    tenant.list_collections()
                except UnauthorizedError:
                    break
                assert time.monotonic() < deadline, "the server still takes the revoked key"
                time.sleep(0.2)
    assert "revoked" in cari(["keys", "list"], env).stdout
    # Each request's log lines name its key, never its secret.
    lines = [json.loads(line) for line in "".join(output).splitlines() if line.startswith("{")]
    keyed = {line.get("api_key") for line in lines if "/v1/" in line["message"]}
    assert {key_id, "CARI_API_KEYS"} <= keyed
    assert not any(secret in line["message"] for line in lines)


def test_a_reader_gets_404_for_another_tenants_document(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = {**cli_env(clean_env, dsn, fake), "CARI_API_KEYS": ADMIN}
    scope = ["-a", "documents:read", "-c", "shop", "--filter", '{"tenant": "acme"}']
    secret = cari(["keys", "create", "reader", *scope], env).stdout.strip()
    with serving(env) as url, Client(url, api_key=ADMIN) as admin:
        admin.create_collection(CollectionCreate(name="shop", language="english"))
        admin.add_documents(
            "shop", [DocumentIn(id="globex/a", text="Theirs.", metadata={"tenant": "globex"})]
        )
        with Client(url, api_key=secret) as reader, pytest.raises(NotFoundError):
            reader.get_document("shop", "globex/a")


def test_the_python_client_manages_keys(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """`/v1/keys` from the Python client: a key made there works at once, is listed and shown
    without its secret, and is refused once revoked (polled: within CARI_KEY_CACHE_TTL_S)."""
    env = {**cli_env(clean_env, dsn, fake), "CARI_API_KEYS": ADMIN}
    with serving(env) as url, Client(url, api_key=ADMIN) as admin:
        admin.create_collection(CollectionCreate(name="shop", language="english"))
        made = admin.create_key(KeyCreate(name="front", actions=["search"], collections=["shop"]))
        assert made.secret.startswith(made.key.id) and made.key.revoked_at is None
        with Client(url, api_key=made.secret) as front:
            assert front.search_collection("shop", SearchRequest(query="tyres")).results == []
            with pytest.raises(ForbiddenError):
                front.list_keys()
            mine = front.get_access()
            assert (mine.key, mine.actions, mine.collections) == (made.key.id, ["search"], ["shop"])
        assert made.key.id in [key.id for key in admin.list_keys()]
        shown = admin.get_key(made.key.id)
        assert (shown.name, shown.actions, shown.collections) == ("front", ["search"], ["shop"])
        assert admin.revoke_key(made.key.id).revoked_at is not None
        with pytest.raises(NotFoundError):
            admin.get_key("cari_00000000")
        deadline = time.monotonic() + 30
        with Client(url, api_key=made.secret) as front:
            while True:
                try:
                    front.search_collection("shop", SearchRequest(query="tyres"))
                except UnauthorizedError:
                    break
                assert time.monotonic() < deadline, "the revoked key is still accepted"
                time.sleep(0.5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--filter", "tenant=acme"], "--filter: is not JSON"),
        (["--filter", "[1]"], "--filter: must be a JSON object"),
        (["--filter", '{"tenant": {"like": "a"}}'], "unknown operator"),
        (["--expires", "2001-01-01"], "expires_at: is in the past"),
        (["--expires", "soon"], "not an ISO 8601"),
        (["-c", "shop a"], "neither a collection's name nor a pattern"),
    ],
)
def test_a_bad_key_is_one_line_and_nothing_is_stored(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], args: list[str], message: str
) -> None:
    env = cli_env(clean_env, dsn, fake)
    refused = cari(["keys", "create", "k", "-a", "search", "-c", "shop", *args], env)
    assert refused.returncode == 1, refused.stdout
    assert message in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "cari_" not in cari(["keys", "list"], env).stdout


def test_an_unknown_action_is_a_usage_error(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    refused = cari(["keys", "create", "k", "-a", "fly", "-c", "*"], cli_env(clean_env, dsn, fake))
    assert refused.returncode == 2
    assert "search" in refused.stderr  # the choices are named


def test_writes_racing_a_revocation_are_each_whole_or_refused(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """Writers keep putting documents with a key while it is revoked (read afresh on every
    request: CARI_KEY_CACHE_TTL_S=0): each write is stored whole or refused with a 401, none
    fails otherwise, and every write sent after the revocation answered is refused."""
    env = {**cli_env(clean_env, dsn, fake), "CARI_API_KEYS": ADMIN, "CARI_KEY_CACHE_TTL_S": "0"}
    text = " ".join(f"Sentence {n} about returning tires within thirty days." for n in range(400))
    with serving(env) as url, Client(url, api_key=ADMIN) as admin:
        admin.create_collection(CollectionCreate(name="shop", language="english"))
        made = admin.create_key(
            KeyCreate(name="writer", actions=["documents:write"], collections=["shop"])
        )
        revoked_at: list[float] = []
        outcomes: list[tuple[str, float, str]] = []  # (document id, sent at, answer)
        lock = threading.Lock()

        def write(worker: int) -> None:
            with Client(url, api_key=made.secret) as writer:
                for n in range(200):
                    document_id = f"w{worker}-{n}"
                    sent = time.monotonic()
                    try:
                        writer.put_document("shop", document_id, DocumentIn(text=text))
                        answer = "stored"
                    except UnauthorizedError:
                        answer = "refused"
                    with lock:
                        outcomes.append((document_id, sent, answer))
                    if answer == "refused":
                        return

        workers = [threading.Thread(target=write, args=(w,)) for w in range(3)]
        for worker in workers:
            worker.start()
        while sum(answer == "stored" for _, _, answer in list(outcomes)) < 6:
            time.sleep(0.05)
        admin.revoke_key(made.key.id)
        revoked_at.append(time.monotonic())
        for worker in workers:
            worker.join(120)
        answers = {answer for _, _, answer in outcomes}
        assert answers == {"stored", "refused"}, outcomes
        assert all(answer == "refused" for _, sent, answer in outcomes if sent > revoked_at[0])
        # Every document has the same text: one stored whole has the chunks they all have.
        whole = [c.content for c in admin.get_document("shop", outcomes[0][0]).chunks]
        assert len(whole) > 1
        for document_id, _, answer in outcomes:
            if answer == "stored":
                chunks = admin.get_document("shop", document_id).chunks
                assert [c.content for c in chunks] == whole, document_id
            else:
                with pytest.raises(NotFoundError):
                    admin.get_document("shop", document_id)
