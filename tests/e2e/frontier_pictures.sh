#!/usr/bin/env bash
# End-to-end: the frontier's pictures render to PNG (rsvg-convert, Debian's librsvg2-bin, which
# scripts/deps.sh installs) at the size the SVG declares, with what a reader needs to see: the
# frontier's series in their colours, the least-energy diamond, a legend; the timeline's viridis
# boxes and a colour bar running the whole scale. The PNGs are decoded here (zlib, no imaging
# library). Skipped, saying so, only where rsvg-convert could not be installed.
set -u
. "$(dirname "$0")/lib.sh"

if ! command -v rsvg-convert >/dev/null 2>&1; then
  echo "SKIPPED: rsvg-convert is not installed (Debian package librsvg2-bin; scripts/deps.sh installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prof="$ZEUS_SOURCE_DIR/tests/data/frontier/small_profile.csv"

check_pictures() { # NAME DIR: DIR holds frontier.svg and timeline.svg
  local name=$1 dir=$2 svg
  for svg in frontier timeline; do
    if rsvg-convert -o "$dir/$svg.png" "$dir/$svg.svg" 2>"$dir/$svg.err"; then
      pass "$name: $svg.svg renders to PNG"
    else
      fail "$name: rsvg-convert $svg.svg: $(cat "$dir/$svg.err")"
    fi
  done
  if python3 - "$dir" <<'EOF'
import collections, re, struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytes(stride)
    for y in range(h):
        start = y * (stride + 1)
        f, cur = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if f == 1:
            for i in range(bpp, stride):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif f == 2:
            cur = bytearray((x + p) & 255 for x, p in zip(cur, prev))
        elif f == 3:
            for i in range(stride):
                cur[i] = (cur[i] + ((cur[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(list(zip(cur[0::bpp], cur[1::bpp], cur[2::bpp])))
        prev = bytes(cur)
    return w, h, rows

def size_of(svg):
    m = re.search(r"<svg [^>]*width='(\d+)' height='(\d+)'", open(svg).read())
    return int(m.group(1)), int(m.group(2))

def near(p, rgb, tol=24):
    return all(abs(p[k] - rgb[k]) <= tol for k in range(3))

def count(hist, rgb, tol=24):
    return sum(n for p, n in hist.items() if near(p, rgb, tol))

d = sys.argv[1]
# The frontier: its size, the series' colours, the diamond, the legend's white box.
w, h, rows = read_png(d + "/frontier.png")
hist = collections.Counter(p for r in rows for p in r)
assert (w, h) == size_of(d + "/frontier.svg"), (w, h)
blue, vermilion, orange, grey = (0, 0x72, 0xB2), (0xD5, 0x5E, 0), (0xE6, 0x9F, 0), (0x99, 0x99, 0x99)
got = {name: count(hist, rgb) for name, rgb in
       (("Pareto line (blue)", blue), ("cost model (vermilion)", vermilion), ("least-energy diamond (orange)", orange),
        ("dominated dots (grey)", grey))}
print("frontier.png %dx%d, pixels: %s" % (w, h, got))
assert got["Pareto line (blue)"] > 150 and got["cost model (vermilion)"] > 100, got
assert got["least-energy diamond (orange)"] > 40 and got["dominated dots (grey)"] > 5, got
svg = open(d + "/frontier.svg").read()
m = re.search(r"<g font-size='11'><rect x='([\d.]+)' y='([\d.]+)' width='([\d.]+)' height='([\d.]+)'", svg)
lx, ly, lw, lh = (float(v) for v in m.groups())
# Inside the legend, right of its symbols: only its background and its black text.
for y in range(int(ly) + 3, int(ly + lh) - 3):
    for x in range(int(lx) + 40, int(lx + lw) - 3):
        p = rows[y][x]
        assert max(p) - min(p) < 40, ("a coloured pixel in the legend's text area", x, y, p)
for tick in ("iteration energy (", "iteration time ("):
    assert tick in svg, tick
# The timeline: viridis from the profile's slowest to its fastest clock, and the colour bar.
w, h, rows = read_png(d + "/timeline.png")
hist = collections.Counter(p for r in rows for p in r)
assert (w, h) == size_of(d + "/timeline.svg"), (w, h)
svg = open(d + "/timeline.svg").read()
bar = re.search(r"<rect x='([\d.]+)' y='([\d.]+)' width='([\d.]+)' height='([\d.]+)' fill='url\(#clock\)'", svg)
bx, by, bw, bh = (float(v) for v in bar.groups())
row = rows[int(by + bh / 2)][int(bx) + 2:int(bx + bw) - 2]
assert near(row[0], (0x44, 0x01, 0x54), 30) and near(row[-1], (0xFD, 0xE7, 0x25), 30), (row[0], row[-1])
assert len(set(row)) > 60, len(set(row))
greens = [p[1] for p in row]
assert all(b >= a - 3 for a, b in zip(greens, greens[1:])), "the colour bar's green channel must grow"
boxes = set(re.findall(r"<rect x='[\d.]+' y='[\d.]+' width='[\d.]+' height='[\d.]+' fill='(#[0-9a-f]{6})'[^/]*?><title>", svg))
assert boxes, "no instruction boxes"
for colour in boxes:
    rgb = tuple(int(colour[k:k + 2], 16) for k in (1, 3, 5))
    assert count(hist, rgb, 6) > 0, ("a box colour that does not appear in the PNG", colour)
print("timeline.png %dx%d: %d box colours, colour bar %d distinct colours" % (w, h, len(boxes), len(set(row))))
EOF
  then pass "$name: the PNGs show the frontier, the legend, the timeline and its colour bar"
  else fail "$name: PNG content"; fi
}

out="$tmp/small"
expect_ok "small profile: solve with pictures" "$ZEUS" frontier --profile "$prof" --stages 2 --microbatches 4 \
  --blocking-power 50 --out "$out" --sample 5 --plot "$out/frontier.svg" --timeline "min-energy:$out/timeline.svg"
check_pictures "small profile" "$out"

data=${ZEUS_TEST_DATA_DIR:-${ZEUS_DATA_DIR_DEFAULT:-}}
gpt3="$data/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv"
if [ -f "$gpt3" ]; then
  out="$tmp/gpt3"
  expect_ok "GPT-3 175B: solve with pictures" "$ZEUS" frontier --profile "$gpt3" --stages 8 --microbatches 12 \
    --blocking-power 83.64 --out "$out" --sample 10 --plot "$out/frontier.svg" --timeline "min-energy:$out/timeline.svg"
  check_pictures "GPT-3 175B" "$out"
  expect_out_has "GPT-3 175B: energy axis in kJ" "iteration energy \(kJ\)" cat "$out/frontier.svg"
else
  echo "SKIPPED (GPT-3 part): the SOSP'24 data is absent ($gpt3)"
fi

finish
