"""The console in a real browser (Debian's chromium, headless, driven by Selenium), for
Tests/CLITests/ConsoleTests.swift: each scenario does what a person would do in the page and
prints what the browser saw as one JSON object; the Swift test holds it to the expectations.

  console_browser.py watch URL X0 Y0 X1 Y1 THICKNESS   (streamlens run: video, box, slider, WHEP)
  console_browser.py tiles URL NAME URI REMOVE          (streamlens serve: add by the form, remove)

  console_browser.py firefox URL                        (the same page in Firefox: it plays)

Run with .deps/browser-venv/bin/python (Selenium 4.40.0, tools/setup.sh step 7). Debian has no
geckodriver, so Firefox is driven through its own remote protocol, Marionette (below).
"""
import base64
import os
import socket
import subprocess
import tempfile
import json
import shutil
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

SLOW = float(__import__("os").environ.get("STREAMLENS_TEST_SLOWDOWN", "1"))


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
              "--window-size=1400,900", "--disable-dev-shm-usage"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=o)
    d.set_script_timeout(60 * SLOW)
    return d


def wait(what, predicate, timeout, explain=None):
    """explain: what the page showed instead, said with the timeout (a failure that says why)."""
    t0 = time.time()
    while time.time() - t0 < timeout * SLOW:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise SystemExit(f"timed out waiting for {what}" + (f"; the page: {explain()}" if explain else ""))


# The tile's video and what it shows instead (the MJPEG fallback's reason, the placeholder's text).
TILE_STATE = ("const t = document.querySelector('section.tile[data-source=\"%s\"]'); if (!t) return 'no tile';"
              "const v = t.querySelector('video'), i = t.querySelector('img.mjpeg'), p = t.querySelector('.placeholder');"
              "return JSON.stringify({video: v && {hidden: v.hidden, stream: !!v.srcObject, paused: v.paused, readyState: v.readyState,"
              " currentTime: v.currentTime, width: v.videoWidth}, mjpeg: i && i.title, placeholder: p && !p.hidden && p.textContent})")


def severe(d):
    return [l["message"] for l in d.get_log("browser") if l["level"] == "SEVERE" and "favicon.ico" not in l["message"]]


VIDEO = "document.querySelector('section.tile[data-source=\"%s\"] video')"

# The frame shown now, drawn into a canvas at the video's own size: RGB at the given points, and
# a 64x64 grey thumbnail of the whole picture (to compare two moments).
GRAB = """const v = %s; const c = document.createElement('canvas');
c.width = v.videoWidth; c.height = v.videoHeight; const g = c.getContext('2d'); g.drawImage(v, 0, 0);
const points = arguments[0].map(([x, y]) => Array.from(g.getImageData(x, y, 1, 1).data.slice(0, 3)));
const t = document.createElement('canvas'); t.width = 64; t.height = 64; const h = t.getContext('2d');
h.drawImage(v, 0, 0, 64, 64); const px = h.getImageData(0, 0, 64, 64).data; const grey = [];
for (let i = 0; i < px.length; i += 4) grey.push(Math.round((px[i] + px[i + 1] + px[i + 2]) / 3));
return {points, grey};"""


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("streamlens_web_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def watch(url, x0, y0, x1, y1, thickness):
    d = browser()
    result = {}
    try:
        d.get(url + "/")
        wait("the video to play", lambda: d.execute_script(f"const v = {VIDEO % 'main'}; return v && v.videoWidth > 0 && v.currentTime > 1"), 60)
        q0 = d.execute_script(f"return {VIDEO % 'main'}.getVideoPlaybackQuality().totalVideoFrames")
        time.sleep(2)
        v = d.execute_script(f"const v = {VIDEO % 'main'}; return [v.videoWidth, v.videoHeight, v.getVideoPlaybackQuality().totalVideoFrames, v.paused]")
        result.update(width=v[0], height=v[1], frames_in_2s=v[2] - q0, paused=v[3])
        # The drawn box: the middle of its top and left edges, and the middle of the face.
        half = thickness // 2
        points = [[(x0 + x1) // 2, y0 + half], [x0 + half, (y0 + y1) // 2], [(x0 + x1) // 2, (y0 + y1) // 2]]
        before = d.execute_script(GRAB % (VIDEO % "main"), points)
        result.update(top_edge=before["points"][0], left_edge=before["points"][1], face_middle=before["points"][2])
        # The stylize stage's strength slider, moved by the keyboard as a person would (End: its maximum).
        slider = d.find_element(By.CSS_SELECTOR, 'input[type=range][data-stage="style"][data-property="strength"]')
        result["slider_before"] = slider.get_attribute("value")
        slider.click()
        slider.send_keys(Keys.END)
        time.sleep(2.5)
        after = d.execute_script(GRAB % (VIDEO % "main"), points)
        result["slider_after"] = slider.get_attribute("value")
        result["picture_change"] = sum(abs(a - b) for a, b in zip(before["grey"], after["grey"])) / len(before["grey"])
        result["strength_after_slider"] = strength(url)
        # The preview window's key: "-" lowers the strength by 0.1 (pressed on the page, not in a field).
        d.find_element(By.CSS_SELECTOR, 'section.tile[data-source="main"] .view').click()
        webdriver.ActionChains(d).send_keys("-").perform()
        wait("the key to take effect", lambda: abs(strength(url) - 0.9) < 1e-6, 20)
        result["strength_after_key"] = strength(url)
        # The style thumbnails: one per style, each a picture the browser decoded.
        result["thumbnails"] = d.execute_script("return [...document.querySelectorAll('img.style[data-stage=\"style\"]')].map(i => i.naturalWidth)")
        # Three more viewers in the page: still one encoder (frames encoded a second ~ the source's rate).
        d.execute_script("""window.extra = [];
            for (let i = 0; i < 3; i++) { const pc = new RTCPeerConnection(); pc.addTransceiver('video', {direction: 'recvonly'});
              window.extra.push(pc);
              pc.createOffer().then(o => pc.setLocalDescription(o)).then(() => fetch('/api/sources/main/whep', {method: 'POST',
                headers: {'Content-Type': 'application/sdp'}, body: pc.localDescription.sdp})).then(r => r.text())
                .then(sdp => pc.setRemoteDescription({type: 'answer', sdp})); }""")
        wait("four viewers", lambda: metrics(url).get('streamlens_web_viewers{source="main",point="%s",kind="webrtc"}' % result.setdefault("point", point_of(url))) == 4, 30)
        key = 'streamlens_web_frames_encoded_total{source="main",point="%s",codec="vp8"}' % result["point"]
        m0, t0 = metrics(url)[key], time.time()
        time.sleep(3)
        m1, t1 = metrics(url)[key], time.time()
        result["viewers"] = 4
        result["encoded_per_second"] = (m1 - m0) / (t1 - t0)
        # What reaches the point meanwhile: the last stage's rate (a slow machine runs below 30).
        stages = json.loads(urllib.request.urlopen(url + "/api/sources/main", timeout=10).read())["stages"]
        result["last_stage_fps"] = next(s["fps"] for s in stages if s["name"] == "style")
        # WHEP by hand: a session's Location ends it once, then it is gone.
        result["whep"] = d.execute_async_script("""const done = arguments[arguments.length - 1];
            (async () => { const pc = new RTCPeerConnection(); pc.addTransceiver('video', {direction: 'recvonly'});
              await pc.setLocalDescription(await pc.createOffer());
              const r = await fetch('/api/sources/main/whep', {method: 'POST', headers: {'Content-Type': 'application/sdp'}, body: pc.localDescription.sdp});
              const where = r.headers.get('Location'); const answer = await r.text();
              const first = await fetch(where, {method: 'DELETE'}); pc.close();
              done([r.status, r.headers.get('Content-Type'), answer.includes('a=candidate'), where, first.status]); })().catch(e => done(String(e)));""")
        # The tile's zone counts (lenszone's reading) and the event feed's snapshots, inline.
        result["zones"] = d.execute_script("return document.querySelector('section.tile[data-source=\"main\"] .zones').textContent")
        result["snapshot_picture_width"] = wait("a snapshot in the event feed", lambda: d.execute_script(
            "const i = document.querySelector('#events li[data-type=\"snapshot\"] img'); return i && i.complete && i.naturalWidth"), 30)
        result["severe"] = severe(d)
        d.save_screenshot(sys.argv[-1]) if sys.argv[-1].endswith(".png") else None
    finally:
        d.quit()
    print(json.dumps(result))


def strength(url):
    stage = json.loads(urllib.request.urlopen(url + "/api/sources/main/stages/style", timeout=10).read())
    return next(p["value"] for p in stage["properties"] if p["name"] == "strength")


def point_of(url):
    for name in metrics(url):
        if name.startswith('streamlens_web_viewers{source="main"'):
            return name.split('point="', 1)[1].split('"', 1)[0]
    return ""


def tiles(url, name, uri, remove):
    d = browser()
    result = {}
    try:
        d.get(url + "/")
        names = lambda: d.execute_script("return [...document.querySelectorAll('section.tile')].map(t => t.dataset.source)")
        result["tiles_at_start"] = sorted(wait("the first tiles", names, 30))
        # Add a source by the form.
        d.find_element(By.CSS_SELECTOR, "form#add input[name=name]").send_keys(name)
        d.find_element(By.CSS_SELECTOR, "form#add input[name=uri]").send_keys(uri)
        d.find_element(By.CSS_SELECTOR, "form#add button, form#add input[type=submit]").click()
        result["tiles_after_add"] = sorted(wait("the added source's tile", lambda: name in names() and names(), 60))
        wait("the added source's video", lambda: d.execute_script(f"const v = {VIDEO % name}; return v && v.videoWidth > 0 && v.currentTime > 0.5"), 60)
        result["added_video_width"] = d.execute_script(f"return {VIDEO % name}.videoWidth")
        # Remove one by its tile's button.
        d.find_element(By.CSS_SELECTOR, f'section.tile[data-source="{remove}"] button.remove').click()
        result["tiles_after_remove"] = sorted(wait("the removed source's tile to go", lambda: remove not in names() and names(), 60))
        result["severe"] = severe(d)
        if sys.argv[-1].endswith(".png"):
            d.save_screenshot(sys.argv[-1])
    finally:
        d.quit()
    print(json.dumps(result))


class Marionette:
    """Firefox's remote protocol: length-prefixed JSON over TCP ("N:[0,id,name,params]"), the
    protocol geckodriver itself speaks to Firefox."""

    def __init__(self, port, timeout):
        deadline = time.time() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("Firefox's Marionette port did not open")
                time.sleep(0.1)
        self.buf = b""
        self.read()  # its hello
        self.id = 0

    def read(self):
        while b":" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("Firefox closed Marionette")
            self.buf += chunk
        n, rest = self.buf.split(b":", 1)
        while len(rest) < int(n):
            rest += self.sock.recv(65536)
        self.buf = rest[int(n):]
        return json.loads(rest[:int(n)])

    def call(self, name, params=None):
        self.id += 1
        data = json.dumps([0, self.id, name, params or {}]).encode()
        self.sock.sendall(str(len(data)).encode() + b":" + data)
        while True:
            m = self.read()
            if m[0] == 1 and m[1] == self.id:
                if m[2]:
                    raise SystemExit(f"{name}: {m[2]}")
                return m[3]

    def script(self, text):
        return self.call("WebDriver:ExecuteScript", {"script": text, "args": []})["value"]


def firefox(url):
    profile = tempfile.mkdtemp()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(os.path.join(profile, "user.js"), "w") as f:
        f.write(f'user_pref("marionette.port", {port});\nuser_pref("media.autoplay.default", 0);\n'
                'user_pref("media.autoplay.blocking_policy", 0);\nuser_pref("browser.shell.checkDefaultBrowser", false);\n')
    ff = subprocess.Popen(["firefox-esr", "--headless", "--marionette", "--no-remote", "--profile", profile],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    result = {}
    try:
        m = Marionette(port, 60 * SLOW)
        m.call("WebDriver:NewSession", {"capabilities": {}})
        # Uncaught errors and rejections, as the page's own console would show them.
        m.call("WebDriver:Navigate", {"url": url + "/"})
        m.script("window.__errors = []; addEventListener('error', e => __errors.push(String(e.message)));"
                 "addEventListener('unhandledrejection', e => __errors.push(String(e.reason)));")
        wait("the video to play in Firefox", lambda: m.script(f"const v = {VIDEO % 'main'}; return v && v.videoWidth > 0 && v.currentTime > 1"), 60,
             explain=lambda: m.script(TILE_STATE % "main"))
        t0 = m.script(f"return {VIDEO % 'main'}.currentTime")
        time.sleep(2)
        v = m.script(f"const v = {VIDEO % 'main'}; return [v.videoWidth, v.videoHeight, v.currentTime, v.paused]")
        result.update(width=v[0], height=v[1], advanced=v[2] - t0, paused=v[3], errors=m.script("return window.__errors"),
                      agent=m.script("return navigator.userAgent"))
        if sys.argv[-1].endswith(".png"):
            with open(sys.argv[-1], "wb") as f:
                f.write(base64.b64decode(m.call("WebDriver:TakeScreenshot", {"full": False})["value"]))
        m.call("WebDriver:DeleteSession")
    finally:
        os.killpg(ff.pid, 9)
        ff.wait()
        __import__("shutil").rmtree(profile, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "watch":
        watch(url, *map(lambda s: int(float(s)), sys.argv[3:8]))
    elif mode == "tiles":
        tiles(url, sys.argv[3], sys.argv[4], sys.argv[5])
    elif mode == "firefox":
        firefox(url)
    else:
        raise SystemExit(f"unknown scenario {mode}")
