"""The search console (/console) in a real headless Chromium, against a real `cari serve` with
API keys, the real local embedding model and a local chat server (tests/fake_llm.py).

The browser is the system's (Debian's `chromium` and `chromedriver`), never downloaded. Without
it these tests skip, unless CARI_REQUIRE_BROWSER is set (CI installs the browser and sets it),
where its absence fails them. With CARI_CONSOLE_SCREENSHOTS set to a folder, each view is saved
there as a PNG (docs/img holds the ones docs/console.md shows).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from cari.search.highlights import plain
from tests.conftest import app_client
from tests.fake_llm import FakeLLM
from tests.test_catalog import AVANZA, CIVIC, RATES

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Headless, and nothing in the background: on a closed network Chromium stalls waiting for
# its update, sync and component services otherwise.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1366,900",  # a laptop screen
]
KEY = "console-test-key"
DOCUMENTS = [
    {
        "id": "rotation",
        "title": "Tire rotation",
        "text": "Rotate the tires every ten thousand kilometres so the tread wears evenly.",
    },
    {
        "id": "pressure",
        "title": "Tire pressure",
        "text": "Check the tire pressure every month: under-inflated tires wear the tread "
        "unevenly and waste fuel.",
    },
    {
        "id": "winter",
        "title": "Winter tyres",
        "text": "Winter tyres grip better on snow and ice than all-season tyres do.",
    },
    {
        "id": "brakes",
        "title": "Brake pads",
        "text": "Brake pads wear faster in city traffic; replace them when they are thinner "
        "than three millimetres.",
    },
    # Holds the question's words without answering it: first by words, not by meaning.
    {
        "id": "logo",
        "title": "Logos",
        "text": "The rotated logo printed on the tires is a trademark, often seen at dealers.",
    },
    {
        "id": "swap",
        "title": "Wheel positions",
        "text": "How frequently do I need to swap my car's wheel positions? Every 10,000 km, "
        "front to back.",
    },
]
QUESTION = "how often should the tires be rotated?"
REPLY = "Rotate the tires every ten thousand kilometres [1]. Check their pressure monthly [2]."


def test_the_console_page_needs_nothing_beyond_the_service(dsn: str) -> None:
    with app_client(dsn, api_keys=[KEY]) as client:
        page = client.get("/console")  # public: the page holds no data
        assert page.status_code == 200
        assert client.get("/console/").text == page.text
        assert page.headers["content-type"].startswith("text/html")
        # Only the service's own files run there, whatever a page or a chunk might inject.
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy
        links = re.findall(r"""(?:src|href)=["']([^"']+)""", page.text)
        assert set(links) == {"/console/console.css", "/console/console.js", "/console/icon.svg"}
        for link in [*links, "/console/api.js", "/console/render.js"]:
            asset = client.get(link)
            assert asset.status_code == 200, link
            # (a spec's link in a comment, an SVG's namespace: nothing is fetched from them)
            fetched = r"https?://(?!html\.spec\.whatwg\.org|www\.w3\.org/2000/svg)"
            assert not re.search(fetched, asset.text), link
        # The front page, public too, leads to the console and the API's docs.
        home = client.get("/")
        assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in home.headers["content-security-policy"]
        hrefs = set(re.findall(r'href="([^"]+)"', home.text))
        assert {"/console", "/docs"} <= hrefs
        for href in hrefs:
            assert client.get(href).status_code == 200, href
        icon = client.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.content == client.get("/console/icon.svg").content
        # The data the page shows comes from /v1, behind the same key as any client.
        assert client.get("/v1/collections").status_code == 401
        headers = {"authorization": f"Bearer {KEY}"}
        assert client.get("/v1/collections", headers=headers).status_code == 200


# -- in the browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        reason = (
            f"no browser to drive: {', '.join(missing)} missing "
            "(Debian: apt-get install chromium chromium-driver)"
        )
        if os.environ.get("CARI_REQUIRE_BROWSER"):
            pytest.fail(f"{reason}, and CARI_REQUIRE_BROWSER is set")
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    # The driver's path is given: Selenium Manager is not run, nothing is downloaded.
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def server(module_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`cari serve` with an API key, the local model and a local chat model, holding the
    collection `cars`: its base URL."""
    from tests.test_cli import serving

    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CARI_", "OTEL_")) and key != "DATABASE_URL"
    }
    with FakeLLM() as llm, pytest.MonkeyPatch.context() as patch:
        llm.reply = REPLY
        llm.delay = 0.15  # per streamed piece: the answer visibly arrives in parts
        env |= {
            "DATABASE_URL": module_dsn,
            "CARI_API_KEYS": KEY,
            "CARI_LLM_BASE_URL": llm.url,
            "CARI_LLM_MODEL": llm.model,
            "CARI_LLM_API_KEY": "test-key",
        }
        patch.chdir(tmp_path_factory.mktemp("serve"))  # no developer `.env` is read
        with serving(env) as base:
            create(base, "cars")
            yield base


def create(base: str, name: str) -> None:
    api(base, "POST", "/collections", {"name": name, "language": "english"})
    added = api(base, "POST", f"/collections/{name}/documents", {"documents": DOCUMENTS})
    assert added["rejected"] == [], added


def api(base: str, method: str, path: str, body: object = None) -> Any:
    response = httpx.request(
        method,
        f"{base}/v1{path}",
        json=body,
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert response.is_success, response.text
    return response.json()


def search(base: str, collection: str, question: str = QUESTION, **settings: Any) -> Any:
    return api(base, "POST", f"/collections/{collection}/search", {"query": question, **settings})


def search_ids(base: str, collection: str, **settings: Any) -> list[str]:
    return [result["id"] for result in search(base, collection, **settings)["results"]]


def wait(driver: WebDriver, condition: Callable[[WebDriver], Any], seconds: float = 60) -> Any:
    return WebDriverWait(driver, seconds, poll_frequency=0.1).until(condition)


def open_console(driver: WebDriver, base: str, collection: str, question: str = QUESTION) -> None:
    """Load the page, give it the key, pick `collection`, ask `question`; wait for side A."""
    driver.get(f"{base}/console")
    driver.execute_script("sessionStorage.clear()")  # the key given by an earlier test
    driver.refresh()
    status = driver.find_element(By.ID, "status")
    # Without the key the API refuses, and the page says so.
    wait(driver, lambda _: "API key" in status.text)
    key = driver.find_element(By.ID, "api-key")
    key.send_keys(KEY)
    driver.find_element(By.CSS_SELECTOR, "#access button").click()
    wait(driver, lambda _: "collection" in status.text)
    Select(driver.find_element(By.ID, "collection")).select_by_value(collection)
    before = run(driver, "a")
    driver.find_element(By.ID, "query").send_keys(question)
    rendered(driver, "a", before)


def run(driver: WebDriver, side: str) -> int:
    value = driver.find_element(By.ID, f"side-{side}").get_attribute("data-run")
    return int(value or 0)


def rendered(driver: WebDriver, side: str, after: int) -> None:
    """Wait for the side's results from a search newer than `after`, and for no search to be
    pending (the page marks the results busy from a change until its search is shown)."""

    def shown(d: WebDriver) -> bool:
        results = d.find_element(By.CSS_SELECTOR, f"#side-{side} .results")
        return run(d, side) > after and results.get_attribute("aria-busy") is None

    wait(driver, shown)


def shown_ids(driver: WebDriver, side: str) -> list[str]:
    items = driver.find_elements(By.CSS_SELECTOR, f"#side-{side} .results > li")
    return [item.get_attribute("data-id") or "" for item in items]


def set_value(driver: WebDriver, element_id: str, value: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def screenshot(driver: WebDriver, name: str, element: WebElement | None = None) -> None:
    folder = os.environ.get("CARI_CONSOLE_SCREENSHOTS")
    if folder:
        target = Path(folder, f"console-{name}.png")
        (element.screenshot if element else driver.save_screenshot)(str(target))


def test_a_tenant_key_sees_its_scope_and_its_own_documents(browser: WebDriver, server: str) -> None:
    """Two tenants' documents sharing words in `shop`, and a search key for acme's: the page
    says what the key may do, lists only `shop`, and shows acme's results only, as the API's
    search with the filter sent does."""
    api(server, "POST", "/collections", {"name": "shop", "language": "english"})
    tenants = [
        {
            "id": f"{tenant}/returns",
            "title": f"Returns at {tenant.title()}",
            "text": f"Tires can be returned within {days} days of delivery.",
            "metadata": {"tenant": tenant},
        }
        for tenant, days in (("acme", 30), ("globex", 14))
    ]
    assert api(server, "POST", "/collections/shop/documents", {"documents": tenants})["results"]
    acme = {"tenant": "acme"}
    scope = {"actions": ["search"], "collections": ["shop"], "filter": acme}
    created = api(server, "POST", "/keys", {"name": "storefront", **scope})
    question = "can I return the tires?"
    expected = search_ids(server, "shop", question=question, filters={"metadata": acme})
    assert expected and len(search_ids(server, "shop", question=question)) > len(expected)

    browser.get(f"{server}/console")
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()
    shown = browser.find_element(By.ID, "key-scope")
    set_value(browser, "api-key", created["secret"])
    browser.find_element(By.CSS_SELECTOR, "#access button").click()
    wait(
        browser,
        lambda _: (
            shown.text == f"Key {created['key']['id']} (storefront): search on shop, "
            'only documents matching {"tenant":"acme"}.'
        ),
    )
    collections = Select(browser.find_element(By.ID, "collection"))
    wait(browser, lambda _: [o.text for o in collections.options] == ["shop"])
    before = run(browser, "a")
    browser.find_element(By.ID, "query").send_keys(question)
    rendered(browser, "a", before)
    assert shown_ids(browser, "a") == expected
    # The CARI_API_KEYS key may do everything, everywhere.
    set_value(browser, "api-key", KEY)
    browser.find_element(By.CSS_SELECTOR, "#access button").click()
    wait(
        browser,
        lambda _: (
            shown.text
            == "CARI_API_KEYS: search, documents:read, documents:write, collections:manage, "
            "keys:manage on every collection."
        ),
    )


def test_search_shows_each_result_with_its_evidence(browser: WebDriver, server: str) -> None:
    open_console(browser, server, "cars")
    expected = search_ids(server, "cars")
    assert expected, "the question has results"
    assert shown_ids(browser, "a") == expected
    for item in browser.find_elements(By.CSS_SELECTOR, "#side-a .results > li"):
        badge = item.find_element(By.CSS_SELECTOR, ".badge")
        relevance = float(badge.find_element(By.CSS_SELECTOR, ".badge-value").text)
        colour = "green" if relevance >= 0.5 else "yellow" if relevance >= 0.3 else "red"
        assert colour in (badge.get_attribute("class") or "").split()
        keyword = item.find_element(By.CSS_SELECTOR, ".keyword").text
        assert re.fullmatch(r"#\d+ · [\d.]+|\N{EN DASH}", keyword)
        assert re.fullmatch(r"#\d+ · [\d.]+", item.find_element(By.CSS_SELECTOR, ".vector").text)
        assert item.find_element(By.CSS_SELECTOR, ".why").text.startswith("Ranked: relevance")
    top = browser.find_element(By.CSS_SELECTOR, "#side-a .results > li")
    marked = {m.text.lower() for m in top.find_elements(By.CSS_SELECTOR, "mark")}
    # The question's words as English stems them: "rotate" is marked for "rotated".
    asked = re.findall(r"\w+", QUESTION)
    assert marked and all(any(w.startswith(m[:5]) for w in asked) for m in marked), marked
    # The passage the API found around the question's words, its matches as it marked them.
    first = search(server, "cars")["results"][0]
    shown = top.find_element(By.CSS_SELECTOR, ".content")
    assert shown.text == plain(first["highlight"])
    assert [m.text for m in shown.find_elements(By.CSS_SELECTOR, "mark")] == re.findall(
        "<mark>(.*?)</mark>", first["highlight"]
    )
    plan = browser.find_element(By.CSS_SELECTOR, "#side-a .plan-body").text
    assert "One question: nothing to split." in plan and "Settings applied" in plan
    stages = [
        li.get_attribute("data-stage")
        for li in browser.find_elements(By.CSS_SELECTOR, "#side-a .waterfall li")
    ]
    assert {"keyword", "embed", "vector", "fuse", "relevance", "total"} <= set(stages)
    # Every control is named for assistive technology: by its label.
    unnamed = browser.execute_script(
        "return [...document.querySelectorAll('input, select, textarea, button')]"
        ".filter(e => !(e.labels?.length || e.textContent.trim())).map(e => e.outerHTML)"
    )
    assert unnamed == []
    screenshot(browser, "search")
    screenshot(browser, "plan", browser.find_element(By.CSS_SELECTOR, "#side-a .plan"))
    screenshot(browser, "timings", browser.find_element(By.CSS_SELECTOR, "#side-a .timings"))


def test_catalog_sources_show_their_computed_installments(browser: WebDriver, server: str) -> None:
    api(server, "POST", "/collections", {"name": "showroom", "language": "indonesian"})
    api(server, "POST", "/collections/showroom/catalog", [CIVIC, AVANZA])
    api(server, "POST", "/collections/showroom/financing-rates", RATES)
    question = "berapa cicilan honda civic rs dp 150 juta tenor 3 tahun?"
    open_console(browser, server, "showroom", question)
    found = search(server, "showroom", question)
    financing = next(r for r in found["results"] if r["kind"] == "financing")
    assert shown_ids(browser, "a")[:2] == ["catalog:CVC-RS", financing["id"]]
    item = f'#side-a .results > li[data-id="{financing["id"]}"]'
    table = browser.find_element(By.CSS_SELECTOR, f"{item} table.plans")
    rows = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    plans = financing["metadata"]["plans"]
    assert [(row[0], row[1], row[4]) for row in rows] == [
        (plan["provider"], str(plan["tenor_months"]), f"{plan['monthly']:,.2f}") for plan in plans
    ]
    assert {row[1] for row in rows} == {"36"}  # "3 tahun"
    plan = browser.find_element(By.CSS_SELECTOR, "#side-a .plan-body").text
    assert "Financing terms read from the question" in plan and "36 months" in plan
    assert "financing" in plan and "Catalog search" in plan
    screenshot(browser, "installments", browser.find_element(By.ID, "side-a"))


def test_changing_a_weight_changes_the_order(browser: WebDriver, server: str) -> None:
    open_console(browser, server, "cars")
    by_meaning = search_ids(server, "cars", keyword_weight=0)
    by_words = search_ids(server, "cars", vector_weight=0)
    assert by_meaning != by_words, "the collection is built so that the two orders differ"

    before = run(browser, "a")
    set_value(browser, "a-keyword_weight", "0")
    rendered(browser, "a", before)
    assert shown_ids(browser, "a") == by_meaning

    before = run(browser, "a")
    set_value(browser, "a-keyword_weight", "1")
    set_value(browser, "a-vector_weight", "0")
    rendered(browser, "a", before)
    assert shown_ids(browser, "a") == by_words
    applied = browser.find_element(By.CSS_SELECTOR, "#side-a .plan-body").text
    assert "keyword 1, vector 0" in applied


def test_two_settings_side_by_side_then_saved_as_defaults(browser: WebDriver, server: str) -> None:
    create(server, "tuned")
    open_console(browser, server, "tuned")
    browser.find_element(By.ID, "compare").click()
    assert browser.find_element(By.ID, "side-b").is_displayed()
    before = run(browser, "b")
    set_value(browser, "b-vector_weight", "0")
    set_value(browser, "b-ef_search", "16")
    rendered(browser, "b", before)
    left, right = shown_ids(browser, "a"), shown_ids(browser, "b")
    assert left == search_ids(server, "tuned")
    assert right == search_ids(server, "tuned", vector_weight=0, ef_search=16)
    assert left != right
    # Each of B's results says where it was in A.
    for index, item in enumerate(browser.find_elements(By.CSS_SELECTOR, "#side-b .results > li")):
        move = item.find_element(By.CSS_SELECTOR, ".move").text
        chunk = item.get_attribute("data-id")
        if chunk not in left:
            assert move == "new"
        elif left.index(chunk) == index:
            assert move == "="
        else:
            arrow = "▲" if left.index(chunk) > index else "▼"
            assert move == f"{arrow}{abs(left.index(chunk) - index)}"
    plan = browser.find_element(By.CSS_SELECTOR, "#side-b .plan-body").text
    assert "16 requested (request), 16 applied" in plan
    screenshot(browser, "compare")

    before = run(browser, "a")
    browser.find_element(By.CSS_SELECTOR, "#side-b .save").click()
    status = browser.find_element(By.ID, "status")
    wait(browser, lambda _: status.text.startswith("Saved as the defaults of tuned"))
    # Only what a collection keeps is saved: the weights and ef_search (candidates are per
    # search).
    saved = api(server, "GET", "/collections/tuned")
    assert (saved["keyword_weight"], saved["vector_weight"], saved["ef_search"]) == (1.0, 0.0, 16)
    rendered(browser, "a", before)
    assert shown_ids(browser, "a") == search_ids(server, "tuned")
    moves = browser.find_elements(By.CSS_SELECTOR, "#side-b .results .move")
    assert [move.text for move in moves] == ["="] * len(moves)


def test_the_answer_streams_with_clickable_citations(browser: WebDriver, server: str) -> None:
    open_console(browser, server, "cars")
    browser.find_element(By.ID, "ask").click()
    answer = browser.find_element(By.ID, "answer")
    text = browser.find_element(By.ID, "answer-text")
    # Part of the answer is on the page while the rest is still coming.
    partial = wait(
        browser,
        lambda _: answer.get_attribute("data-state") == "streaming" and text.text.strip(),
    )
    assert REPLY.startswith(partial) and partial != REPLY
    wait(browser, lambda _: answer.get_attribute("data-state") == "done")
    assert text.text == REPLY
    sources = browser.find_elements(By.CSS_SELECTOR, "#answer-sources > li")
    assert len(sources) >= 2
    assert [s.get_attribute("data-id") for s in sources] == search_ids(server, "cars")[
        : len(sources)
    ]
    cited = browser.find_elements(By.CSS_SELECTOR, "#answer-sources > li.cited")
    assert [s.get_attribute("id") for s in cited] == ["source-1", "source-2"]
    assert "model: fake-chat-model" in browser.find_element(By.ID, "answer-meta").text

    links = text.find_elements(By.CSS_SELECTOR, "a.cite")
    assert [link.text for link in links] == ["[1]", "[2]"]
    links[1].click()
    second = browser.find_element(By.ID, "source-2")
    assert "target" in (second.get_attribute("class") or "").split()
    assert browser.switch_to.active_element == second
    screenshot(browser, "answer", answer)


def test_filters_apply_and_bad_ones_are_named(browser: WebDriver, server: str) -> None:
    open_console(browser, server, "cars")
    filters = browser.find_element(By.ID, "a-filters")
    error = browser.find_element(By.CSS_SELECTOR, "#side-a .field-error")
    before = run(browser, "a")
    filters.send_keys('{"document_ids": ')
    wait(browser, lambda _: error.text.startswith("Filters: not JSON"))
    assert filters.get_attribute("aria-invalid") == "true"
    assert run(browser, "a") == before  # nothing was searched

    filters.clear()
    set_value(browser, "a-threshold", "1e")  # a number field holding no number
    wait(browser, lambda _: error.text == "Threshold: not a number")
    browser.find_element(By.ID, "a-threshold").clear()

    # JSON, but no filter the API knows: its problem detail is shown.
    set_value(browser, "a-filters", '{"colour": "red"}')
    summary = browser.find_element(By.CSS_SELECTOR, "#side-a .summary")
    wait(browser, lambda _: summary.text.startswith("Search failed: filters"))
    assert browser.find_element(By.ID, "status").get_attribute("data-kind") == "error"

    set_value(browser, "a-filters", '{"document_ids": ["pressure", "swap"]}')
    wait(browser, lambda _: not error.text and summary.text.startswith("2 results"))
    chosen = {"document_ids": ["pressure", "swap"]}
    assert shown_ids(browser, "a") == search_ids(server, "cars", filters=chosen)
    assert {
        item.find_element(By.CSS_SELECTOR, ".source").text
        for item in browser.find_elements(By.CSS_SELECTOR, "#side-a .results > li")
    } == {"pressure", "swap"}


def test_a_split_question_shows_its_sub_queries(browser: WebDriver, server: str) -> None:
    question = "tire rotation vs brake pads"
    open_console(browser, server, "cars", question)
    found = search(server, "cars", question, explain=True)
    parts = found["explain"]["decomposition"]["sub_queries"]
    assert len(parts) == 2
    plan = browser.find_element(By.CSS_SELECTOR, "#side-a .plan-body")
    assert "into 2 sub-queries" in plan.text
    shown = [q.text for q in plan.find_elements(By.CSS_SELECTOR, ".sub-queries q")]
    assert shown == parts
    assert shown_ids(browser, "a") == [result["id"] for result in found["results"]]
    # Each result says which sub-query kept it.
    whys = [w.text for w in browser.find_elements(By.CSS_SELECTOR, "#side-a .results .why")]
    assert {part for part in parts if any(f"(sub-query “{part}”)" in why for why in whys)} == set(
        parts
    )
    # ... the one whose relevance the result shows (where both kept it, the one it came from).
    for result, why in zip(found["results"], whys, strict=True):
        shown_relevance = f"{round(result['relevance'], 2):g}"  # as the page prints it
        assert f"relevance {shown_relevance}," in why, (result, why)


def test_a_misspelled_question_shows_the_text_embedded(browser: WebDriver, server: str) -> None:
    """The vector side embedded the question respelled; the plan says so."""
    question = "tire rotatoin"
    open_console(browser, server, "cars", question)
    found = search(server, "cars", question, explain=True)
    assert found["explain"]["sub_queries"][0]["embedded_query"] == "tire rotation"
    plan = browser.find_element(By.CSS_SELECTOR, "#side-a .plan-body")
    wait(browser, lambda _: "embedded as “tire rotation”" in plan.text)
    assert [q.text for q in plan.find_elements(By.CSS_SELECTOR, ".sub-queries q")] == [question]


def test_the_ef_search_curve_of_a_collection(browser: WebDriver, server: str) -> None:
    open_console(browser, server, "cars")
    browser.find_element(By.ID, "tune-ef").click()
    note = browser.find_element(By.ID, "tuning-note")
    wait(browser, lambda _: not note.text.startswith("Measuring") and note.text)
    points = browser.find_elements(By.CSS_SELECTOR, "#tuning-curve svg circle[data-ef]")
    measured = api(server, "POST", "/collections/cars/tune/ef-search", {"sample": 100})
    assert [int(p.get_attribute("data-ef") or 0) for p in points] == [
        p["ef_search"] for p in measured["points"]
    ]
    # A handful of documents: PostgreSQL reads them all at any ef_search, so nothing is
    # recommended, and the page says why instead of offering a value.
    assert not any(p["index_used"] for p in measured["points"])
    assert "nothing to tune yet" in note.text
    assert all(p.get_attribute("fill") == "white" for p in points)  # hollow: exact scans
    assert not browser.find_element(By.ID, "tuning-apply").is_displayed()
    screenshot(browser, "tune-ef-search", browser.find_element(By.ID, "tuning"))
