"""The /ui page in a real headless browser: Debian's chromium driven by Playwright, against a teola
server with an API key on (advanced RAG on simulated engines, so the test takes seconds). It runs a
query from the page, finds the timeline with one bar per primitive that ran, saves screenshots
under tests/artifacts/ and shows the error state once the server is gone. Fails (never skips)
when chromium or playwright is missing."""

from __future__ import annotations

import asyncio
import shutil
import socket
from pathlib import Path

import httpx
import pytest

from teola.server import ServerSettings, create_server
from tests.support.waiting import until
from tests.unit.server.test_server import make_rag_app

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
KEY = "ui-test-key"


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "Debian's chromium is not installed: `apt-get install -y chromium` "
            "(scripts/setup.sh does it as root)"
        )
    return path


async def start_server(app) -> tuple[object, asyncio.Task, str]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(create_server({"advanced_rag": app}, ServerSettings(api_key=KEY)), log_level="warning")
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    await until(lambda: server.started or serving.done())
    if serving.done():
        serving.result()
    assert server.started, "the server exited during start-up"
    return server, serving, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def test_ui_runs_a_query_and_draws_its_timeline():
    from playwright.async_api import async_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    app, _ = make_rag_app()
    server, serving, url = await start_server(app)
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
            page = await browser.new_page(viewport={"width": 1280, "height": 1100})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"{url}/ui")
            await page.wait_for_selector("#error:not([hidden])")  # no key yet: 401 shown
            assert "API key" in await page.text_content("#error")
            await page.fill("#apikey", KEY)
            await page.dispatch_event("#apikey", "change")
            await page.wait_for_selector("#graph svg .node")
            assert await page.locator("#graph svg .node").count() > 5
            await page.wait_for_selector("#engines tbody tr")
            await page.click("#run-button")
            await page.wait_for_selector("#timeline svg rect.bar-run", timeout=60_000)
            qid = await page.get_attribute("#queries tr.selected", "data-query")
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as client:
                detail = (await client.get(f"/v1/ui/queries/{qid}")).json()
            ran = {
                t["primitive"]
                for t in detail["trace"]
                if t["started"] is not None and t["finished"] is not None
            }
            bars = await page.eval_on_selector_all(
                "#timeline rect.bar-run", "els => els.map(e => e.dataset.primitive)"
            )
            assert sorted(bars) == sorted(ran) and len(ran) == len(detail["trace"])
            critical = await page.eval_on_selector_all(
                "#timeline rect.bar-run.critical", "els => els.map(e => e.dataset.primitive)"
            )
            assert critical and sorted(critical) == sorted(detail["critical_path"])
            await page.screenshot(path=str(ARTIFACTS / "ui.png"), full_page=True)
            assert not await page.is_visible("#error") and not errors, errors

            server.should_exit = True
            await serving
            await page.wait_for_selector("#error:not([hidden])", timeout=15_000)
            assert "Cannot reach the teola server" in await page.text_content("#error")
            assert await page.text_content("#status") == "error"
            await page.screenshot(path=str(ARTIFACTS / "ui-server-down.png"))
            await browser.close()
    finally:
        server.should_exit = True
        if not serving.done():
            await serving
