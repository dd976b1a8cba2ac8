#!/usr/bin/env python3
"""docs/console.jpg: the console as a person sees it, made by the real thing.

`streamlens serve --http` with four public-domain photos as live cameras (scikit-image's, in
.deps/media: the astronaut, the cat, the coffee, the rocket), each detected, tracked and stylized
with a different shipped style; headless chromium opens the console, selects the astronaut and
waits for every tile to play, then saves the screenshot.

  .deps/browser-venv/bin/python tools/console-screenshot.py [.build/release/streamlens] [docs/console.jpg]
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release/streamlens")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs/console.jpg")
SOURCES = [("astronaut", "astronaut.png", "Models/mosaic.json", 0.6), ("cat", "chelsea.png", "Models/waves.json", 1.0),
           ("coffee", "coffee.png", "Models/embers.json", 0.8), ("rocket", "rocket.jpg", "Models/mosaic.json", 0.0)]


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(r, timeout=60) as a:
        return json.loads(a.read() or b"null")


def main():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    u = f"http://127.0.0.1:{port}"
    work = tempfile.mkdtemp()
    template = os.path.join(work, "photo.pipeline")
    with open(template, "w") as f:
        # A photo as a live camera; faces found and followed; a style, then the boxes drawn over
        # it (lensoverlay); a snapshot when a new face is seen (the event feed shows it).
        f.write("uridecodebin uri=${URI} ! imagefreeze is-live=true ! videoconvert ! videoscale ! "
                "video/x-raw,format=BGRx,width=640,height=360,pixel-aspect-ratio=1/1,framerate=15/1 ! "
                "lensdetect name=faces model=Models/face-full-range.json draw=false ! lenstrack name=track ! "
                "lensstylize name=style inference-size=320x180 ! lensoverlay name=boxes thickness=3 ! lenssnapshot name=snap what=crop path=" + work + "/snap/${NAME}-{id}.jpg ! fakesink\n")
    serve = subprocess.Popen([BIN, "serve", "--http", str(port), template], cwd=ROOT, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "serve.log"), "w"))
    driver = None
    try:
        for _ in range(300):
            try:
                call("GET", u + "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        opts = webdriver.ChromeOptions()
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
                  "--window-size=1500,1000", "--hide-scrollbars"):
            opts.add_argument(a)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
        driver.get(u + "/")
        for name, photo, model, strength in SOURCES:
            call("POST", u + "/api/sources", {"name": name, "uri": "file://" + os.path.join(ROOT, ".deps/media", photo)})
            call("PATCH", f"{u}/api/sources/{name}/stages/style", {"model": model, "strength": strength})
        deadline = time.time() + 90
        while time.time() < deadline:
            playing = driver.execute_script("return [...document.querySelectorAll('section.tile video')].filter(v => v.currentTime > 2).length")
            if playing == len(SOURCES):
                break
            time.sleep(0.5)
        # The styles set by PATCH load their networks meanwhile; the snapshots reach the feed.
        time.sleep(8)
        driver.find_element("css selector", 'section.tile[data-source="astronaut"]').click()
        time.sleep(3)
        png = os.path.join(work, "console.png")
        driver.save_screenshot(png)
        if OUT.endswith(".png"):
            shutil.copy(png, OUT)
        else:  # JPEG by ffmpeg (set-up installs it): a quarter of the PNG's size
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", png, "-q:v", "3", OUT], check=True)
        print(f"console-screenshot: {OUT} ({playing} of {len(SOURCES)} tiles playing)")
    finally:
        if driver:
            driver.quit()
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
