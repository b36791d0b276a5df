"""What checking a customer's photo costs the web process: CPU seconds and peak resident memory of
`attachments.prepare` (open, check, decode, re-encode, thumbnail and preview), per kind of file.

Files, made here (nothing downloaded):
  png-40mp   an 8000 x 5000 PNG of a few flat shapes: about 170 KB that declare 40 megapixels
  jpeg-12mp  a 4000 x 3000 phone-like JPEG (smooth shading and sensor noise, quality 90): a few MB
  jpeg-24mp  the same at 5712 x 4284 (a 24 MP phone's), quality 85
  png-25mp   a 5000 x 5000 PNG of shapes and some grain: the most pixels a photo may have
  png-4k     a 3840 x 2160 screenshot-like PNG (flat panels, lines of "text")
Each case runs in a fresh Python process (Django set up, nothing else loaded): "RSS +" is its peak resident
memory during the work (VmHWM, reset just before) minus what was resident before it. "×4" is four files of
the kind in one message, as the upload view prepares them (one after another).

`python bench/uploads.py [--root DIR] [--repeat N]`: DIR is the checkout whose code is measured (another
commit's, unpacked, to compare before and after); the default is this one. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import DJANGO_ENV, PY, ROOT
from bench.measure import md_table, med

# Run in the child: set Django up from `root`, read the file, prepare it `count` times, report the cost.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import django
django.setup()
from django.core.files.uploadedfile import SimpleUploadedFile
from support.customers import attachments

def status(field):  # kB in /proc/self/status, as bytes
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

raw = open(sys.argv[2], "rb").read()
count = int(sys.argv[3])
before_rss = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from what is resident now
cpu0, wall0 = time.process_time(), time.perf_counter()
try:
    for i in range(count):
        p = attachments.prepare(SimpleUploadedFile(f"file{i}", raw))
    outcome = f"stored {p.width}x{p.height}, {len(p.data) // 1000} KB"
except attachments.Refused as refused:
    outcome = f"refused {refused.status} {refused.code}"
cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
print(json.dumps({"cpu": cpu, "wall": wall, "rss_before": before_rss, "rss_peak": status("VmHWM"),
                  "outcome": outcome}))
"""


def png_40mp() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (8000, 5000), (240, 240, 236))
    draw = ImageDraw.Draw(image)
    for i in range(12):
        draw.rectangle((i * 600, i * 350, i * 600 + 900, i * 350 + 500), fill=(30 + i * 15, 90, 200 - i * 10))
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    return out.getvalue()


def photo_like(size: tuple[int, int]):
    """Smooth shading (a scene's light) plus per-pixel noise (a sensor's): compresses as a photo does."""
    from PIL import Image, ImageFilter

    rng = random.Random(7)
    small = Image.new("RGB", (40, 30))
    small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(40 * 30)])
    scene = small.resize(size, Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(6))
    noise = Image.effect_noise(size, 24).convert("RGB")
    return Image.blend(scene, noise, 0.12)


def jpeg_12mp() -> bytes:
    out = io.BytesIO()
    photo_like((4000, 3000)).save(out, "JPEG", quality=90)
    return out.getvalue()


def jpeg_24mp() -> bytes:
    out = io.BytesIO()
    photo_like((5712, 4284)).save(out, "JPEG", quality=85)
    return out.getvalue()


def png_25mp() -> bytes:
    """The most a PNG may be: 5000 x 5000, shapes on a background with some grain, a few hundred KB."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (5000, 5000), (240, 240, 236))
    draw = ImageDraw.Draw(image)
    for i in range(10):
        draw.rectangle((i * 450, i * 450, i * 450 + 900, i * 450 + 600), fill=(30 + i * 15, 90, 200 - i * 10))
    grain = Image.effect_noise((5000, 400), 40).convert("RGB")
    image.paste(grain, (0, 4600))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def png_4k_screenshot() -> bytes:
    from PIL import Image, ImageDraw

    rng = random.Random(3)
    image = Image.new("RGB", (3840, 2160), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 3840, 120), fill=(32, 60, 110))
    draw.rectangle((0, 120, 700, 2160), fill=(236, 238, 242))
    for y in range(200, 2100, 44):  # lines of "text": short dark runs of varying length
        x = 780
        while x < 3700:
            w = rng.randrange(20, 140)
            draw.rectangle((x, y, x + w, y + 22), fill=(40, 40, 40))
            x += w + rng.randrange(12, 30)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


CASES = [("png-40mp", png_40mp, 1), ("png-40mp ×4", png_40mp, 4), ("jpeg-12mp", jpeg_12mp, 1),
         ("jpeg-12mp ×4", jpeg_12mp, 4), ("jpeg-24mp", jpeg_24mp, 1), ("png-25mp", png_25mp, 1),
         ("png-4k", png_4k_screenshot, 1)]


def measure(root: Path, path: Path, count: int) -> dict:
    env = {**os.environ, **DJANGO_ENV, "VAR_DIR": tempfile.gettempdir() + "/bench-uploads-var"}
    done = subprocess.run([PY, "-c", CHILD, str(root), str(path), str(count)], check=False, env=env,
                          cwd=root, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose code is measured")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per case (medians are shown)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        made: dict = {}
        for label, make, count in CASES:
            if make not in made:
                made[make] = Path(tmp) / f"{make.__name__}.bin"
                made[make].write_bytes(make())
            path = made[make]
            runs = [measure(args.root.resolve(), path, count) for _ in range(args.repeat)]
            rows.append([label, f"{path.stat().st_size / 1000:,.0f} KB",
                         f"{med([r['cpu'] for r in runs]):.2f}", f"{med([r['wall'] for r in runs]):.2f}",
                         f"{med([(r['rss_peak'] - r['rss_before']) / 2**20 for r in runs]):.0f}",
                         f"{med([r['rss_peak'] / 2**20 for r in runs]):.0f}", runs[-1]["outcome"]])
    print(f"code measured: {args.root.resolve()}; medians of {args.repeat} fresh processes per case\n")
    print(md_table(["case", "file", "CPU s", "wall s", "RSS + MB", "peak RSS MB", "outcome (last file)"], rows))


if __name__ == "__main__":
    main()
