"""Headless Chromium for the report tests: load a local HTML file at a given window size,
measure the rendered page (Runtime.evaluate over the DevTools protocol on
--remote-debugging-pipe: no port, no network, works under the report's CSP, which forbids
scripts in the page itself) and save a PNG screenshot. Chromium runs with a fresh profile
and its network features off, inside the given namespace (ip netns exec), in its own
process group, killed at the end; every wait is bounded."""

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time


class ChromiumError(Exception):
    pass


class _Pipe:
    def __init__(self, wfd, rfd, deadline):
        self.wfd, self.rfd, self.deadline = wfd, rfd, deadline
        self.buf = b""
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise ChromiumError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name):
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            self.events.append(self._read())

    def _read(self):
        while b"\0" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError("no answer from chromium in time")
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise ChromiumError("chromium closed the pipe")
            self.buf += chunk
            if len(self.buf) > 64 << 20:
                raise ChromiumError("oversized DevTools message")
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)


MEASURE = """JSON.stringify({
  scroll_width: document.documentElement.scrollWidth,
  client_width: document.documentElement.clientWidth,
  height: document.documentElement.scrollHeight,
  wide: Array.from(document.querySelectorAll('body *')).filter(
      e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
  ).map(e => e.tagName + '#' + e.id).slice(0, 10),
  rows: document.querySelectorAll('tr').length,
  more: Array.from(document.querySelectorAll('tr.more')).map(e => e.textContent),
  warnings: Array.from(document.querySelectorAll('.warn')).map(e => e.id),
  svgs: document.querySelectorAll('svg').length
})"""


def render(html_path, png_path, ns=None, width=1280, height=900, timeout=60, clip_y=0):
    """Load html_path at width x height; save a screenshot of width x height from page
    offset clip_y to png_path; return the measurements of MEASURE (a dict)."""
    profile = tempfile.mkdtemp(prefix="egx-chromium-")
    cmd_r, cmd_w = os.pipe()     # we write commands, chromium reads fd 3
    out_r, out_w = os.pipe()     # chromium writes fd 4, we read
    hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
    hi_w = fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)

    def child():
        os.dup2(hi_r, 3)
        os.dup2(hi_w, 4)
        os.setpgid(0, 0)

    args = (["ip", "netns", "exec", ns] if ns else []) + [
        "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", "--user-data-dir=" + profile,
        "--remote-debugging-pipe", "--window-size=%d,%d" % (width, height), "about:blank"]
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, pass_fds=(3, 4, hi_r, hi_w), preexec_fn=child)
    for fd in (cmd_r, out_w, hi_r, hi_w):
        os.close(fd)
    try:
        pipe = _Pipe(cmd_w, out_r, time.monotonic() + timeout)
        t = pipe.call("Target.createTarget", {"url": "about:blank"})
        s = pipe.call("Target.attachToTarget", {"targetId": t["targetId"],
                                                "flatten": True})["sessionId"]
        pipe.call("Page.enable", session=s)
        pipe.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1,
                   "mobile": False}, session=s)
        pipe.call("Page.navigate", {"url": "file://" + os.path.abspath(html_path)},
                  session=s)
        pipe.wait_event("Page.loadEventFired")
        r = pipe.call("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True},
                      session=s)
        m = json.loads(r["result"]["value"])
        shot = pipe.call("Page.captureScreenshot",
                         {"format": "png", "clip": {"x": 0, "y": clip_y, "width": width,
                                                    "height": height, "scale": 1},
                          "captureBeyondViewport": True}, session=s)
        with open(png_path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        try:
            pipe.call("Browser.close")
        except ChromiumError:
            pass
        return m
    except ChromiumError as e:
        raise ChromiumError("%s; chromium stderr: %s" % (
            e, (p.stderr.read(2000) if p.poll() is not None else b"").decode(errors="replace")))
    finally:
        os.close(cmd_w)
        os.close(out_r)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)
        p.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)
