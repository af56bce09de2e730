"""A headless Chromium driven as a person uses it, through chromedriver's W3C WebDriver API
(JSON over HTTP: a few requests, no Selenium). Test-only: Debian's `chromium` and
`chromium-driver` (scripts/test-packages installs them)."""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import requests

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # W3C's key of an element reference
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--window-size=1400,2200", "--hide-scrollbars"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, timeout: float = 120.0) -> None:
        driver = shutil.which("chromedriver")
        chromium = shutil.which("chromium")
        if not driver or not chromium:
            raise RuntimeError("chromium and chromium-driver are missing: run "
                               "scripts/test-packages (the tests' Debian packages)")
        port = _free_port()
        self.timeout = timeout
        self.process = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"{self.base}/status", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    self.process.kill()
                    raise
                time.sleep(0.2)
        caps = {"browserName": "chrome",
                "goog:chromeOptions": {"binary": chromium, "args": ARGS}}
        self.session = self._call("POST", "/session",
                                  {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = requests.request(method, f"{self.base}{path}", json=body,
                                    timeout=self.timeout)
        value = response.json()["value"]
        if response.status_code != 200:
            raise RuntimeError(f"WebDriver {method} {path}: {value.get('message', value)}")
        return value

    def _s(self, path: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def go(self, url: str) -> None:
        self._s("/url", "POST", {"url": url})

    def find(self, css: str) -> str:
        return self._s("/element", "POST", {"using": "css selector", "value": css})[ELEMENT]

    def type(self, css: str, text: str) -> None:
        self._s(f"/element/{self.find(css)}/value", "POST", {"text": text})

    def click(self, css: str) -> None:
        self._s(f"/element/{self.find(css)}/click", "POST", {})

    def text(self, css: str = "body") -> str:
        """What a person reads there (the rendered text, markup and hidden parts aside)."""
        return self._s(f"/element/{self.find(css)}/text")

    def url(self) -> str:
        return self._s("/url")

    def scripts_run(self) -> Any:
        """A page-global a planted script would set (None where none ran)."""
        return self._s("/execute/sync", "POST",
                       {"script": "return window.__planted || null;", "args": []})

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self._s("/screenshot")))
        return path

    def login(self, base: str, user: str, password: str) -> None:
        """NetBox's login form, filled in and sent."""
        self.go(f"{base}/login/")
        self.type("input[name=username]", user)
        self.type("input[name=password]", password)
        self.click("form[action='/login/'] button[type=submit]")
        # WebDriver does not wait for the form's answer: a page opened before it lands comes
        # back as the login page (seen on a loaded machine). Wait until NetBox has let us in.
        deadline = time.monotonic() + self.timeout
        while "/login/" in self.url():
            if time.monotonic() > deadline:
                raise RuntimeError(f"NetBox's login page still shown {self.timeout:.0f} s after "
                                   f"sending it: {' '.join(self.text().split())[:300]}")
            time.sleep(0.2)

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.process.terminate()
            self.process.wait(timeout=30)
