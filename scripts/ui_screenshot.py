"""Take the README's screenshot of the /ui page (docs/ui.png) on the real engines.

    python scripts/ui_screenshot.py [--app advanced_rag] [--queries 3] [--out docs/ui.png]

Serves the app on 127.0.0.1 (engines start as with `teola serve`), sends a few of its sample
queries at once (so their primitives share engine batches), opens /ui in Debian's chromium through
Playwright, selects the last query's timeline and saves a full-page screenshot."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def shoot(app_name: str, n: int, out: Path) -> None:
    import httpx
    import uvicorn
    from playwright.async_api import async_playwright

    from engines.assets.paths import configure_engine_env
    from teola.server import ServerSettings, create_server, resolve_app

    configure_engine_env()
    app = resolve_app(app_name)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            create_server({app_name: app}, ServerSettings(query_timeout=900), progress=print),
            log_level="warning",
        )
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        query, _ = app.sample()
        async with httpx.AsyncClient(base_url=url, timeout=900) as client:
            variants = [
                {**query, "question": q}
                for q in (
                    query["question"],
                    "Who designed the Eiffel Tower?",
                    "When was the Eiffel Tower built?",
                )[:n]
            ]
            bodies = await asyncio.gather(
                *(client.post(f"/v1/apps/{app_name}/query", json={"query": v}) for v in variants)
            )
        ids = [b.json()["query_id"] for b in bodies]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox"]
            )
            page = await browser.new_page(viewport={"width": 1280, "height": 1000})
            await page.goto(f"{url}/ui")
            await page.wait_for_selector(f'#queries tr[data-query="{ids[0]}"]')
            await page.click(f'#queries tr[data-query="{ids[0]}"]')
            await page.wait_for_selector("#timeline svg rect.bar-run")
            await page.screenshot(path=str(out), full_page=True)
            await browser.close()
        print(f"wrote {out}")
    finally:
        server.should_exit = True
        await serving


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--app", default="advanced_rag")
    p.add_argument("--queries", type=int, default=3)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "ui.png"))
    args = p.parse_args()
    asyncio.run(shoot(args.app, max(1, min(3, args.queries)), Path(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
