#!/usr/bin/env python3
"""plot-check.py SVG KIND [PNG_DIR] -- checks one of nofall's pictures (docs/plots.md).

Always: the file parses as XML (an <svg> root), has the marks KIND needs
(tracks: <path class="track"> with at least MIN points; bars: <rect
class="bar">), axis tick labels and axis labels. With chromium on PATH
(and NOFALL_NO_BROWSER unset): a headless screenshot at the SVG's size,
decoded here (zlib; no Pillow), must not be blank and must show the track
colours (blue #1f77b4 / red #d62728). PNG_DIR: the screenshot is kept there.
Exit 0 ok, 1 a failed check (message on stderr).
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    sys.exit(f"{sys.argv[1]}: {msg}")


def path_points(d):
    # M/L/H/V commands: one point per command letter
    return sum(d.count(c) for c in "MLH")


def check_svg(path, kind):
    root = ET.parse(path).getroot()
    if root.tag != NS + "svg":
        fail(f"root is {root.tag}, not svg")
    texts = [t.text or "" for t in root.iter(NS + "text")]
    tracks = [p for p in root.iter(NS + "path") if p.get("class") == "track"]
    bars = [r for r in root.iter(NS + "rect") if r.get("class") == "bar"]
    want = {
        "run": dict(tracks=2, labels=["position", "probability", "acceptor", "donor"]),
        "variant": dict(tracks=4, labels=["position", "acceptor probability", "donor probability", "ref", "alt",
                                          "variant"]),
        "verify": dict(bars=1, labels=["case", "bound (max_abs)", "max |device - reference|"]),
        "verify-stages": dict(bars=2, labels=["stage", "after each stage", "bound (max_abs)"]),
    }[kind]
    if len(tracks) < want.get("tracks", 0):
        fail(f"{len(tracks)} track paths, want {want['tracks']}")
    for p in tracks:
        if path_points(p.get("d", "")) < 50:
            fail(f"a track with {path_points(p.get('d', ''))} points")
    if len(bars) < want.get("bars", 0):
        fail(f"{len(bars)} bars, want >= {want['bars']}")
    for lab in want["labels"]:
        if not any(lab in t for t in texts):
            fail(f"no text containing {lab!r}")
    ticks = [t for t in texts if t.replace(".", "").replace("-", "").replace("e", "").isdigit()]
    if len(ticks) < 4:
        fail(f"{len(ticks)} tick labels")
    return int(float(root.get("width"))), int(float(root.get("height")))


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("screenshot is not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                fail(f"PNG depth {depth} colour type {ctype} interlace {interlace}: not decoded here")
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def check_png(png, kind):
    w, h, bpp, rows = png_pixels(png)
    dark = blue = red = 0
    for line in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = line[x], line[x + 1], line[x + 2]
            if min(r, g, b) < 200:
                dark += 1
            if b > 150 and r < 90 and g < 160:
                blue += 1
            if r > 170 and g < 90 and b < 90:
                red += 1
    if dark < 0.01 * w * h:
        fail(f"screenshot blank: {dark} non-white pixels of {w * h}")
    if kind in ("run", "variant") and (blue < 50 or red < 50):
        fail(f"screenshot lacks the tracks: {blue} blue, {red} red pixels")
    if kind.startswith("verify") and blue + red < 200:
        fail(f"screenshot lacks the bars: {blue} blue, {red} red pixels")
    return dark, blue, red


def main():
    svg, kind = sys.argv[1], sys.argv[2]
    keep = sys.argv[3] if len(sys.argv) > 3 else None
    w, h = check_svg(svg, kind)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser or os.environ.get("NOFALL_NO_BROWSER"):
        print(f"ok   {svg}: XML, marks and labels ({kind}); no chromium: not rendered")
        return
    with tempfile.TemporaryDirectory() as td:
        png = os.path.join(td, "shot.png")
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={td}/profile", f"--window-size={w},{h}", f"--screenshot={png}",
               "file://" + os.path.abspath(svg)]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        if not os.path.exists(png):
            fail("chromium wrote no screenshot")
        dark, blue, red = check_png(png, kind)
        if keep:
            shutil.copy(png, os.path.join(keep, os.path.basename(svg)[:-4] + ".png"))
    print(f"ok   {svg}: XML, marks and labels ({kind}); chromium: {dark} non-white, {blue} blue, {red} red pixels")


main()
