"""Whether a screenshot of TensorBoard's Scalars dashboard shows two runs' curves.

  tensorboard_screenshot.py PNG

TensorBoard 2.21 colours its first two runs #ff7043 and #0077bb (the run selector's checkboxes
show them). A chart with both curves drawn has many pixels of each right of the run selector and
below the tag search bar (the orange title bar and the selector's own checkboxes are outside).
Prints what it counted; exits 1 when either colour has fewer than 150 pixels there.
"""
import sys

from PIL import Image

RUN_COLOURS = {"first run (#ff7043)": (0xFF, 0x70, 0x43), "second run (#0077bb)": (0x00, 0x77, 0xBB)}
MIN_PIXELS = 150


def main():
    image = Image.open(sys.argv[1]).convert("RGB")
    width, height = image.size
    # The run selector takes the left 330 pixels of a 1400-wide window; the bars the top 130.
    pixels = list(image.crop((360, 140, width, height)).get_flattened_data())
    counts = {}
    for name, (r, g, b) in RUN_COLOURS.items():
        counts[name] = sum(1 for (pr, pg, pb) in pixels if abs(pr - r) + abs(pg - g) + abs(pb - b) <= 60)
    said = ", ".join(f"{n}: {c} pixels" for n, c in counts.items())
    if min(counts.values()) < MIN_PIXELS:
        print(f"fewer than {MIN_PIXELS} pixels of a run's colour in the charts ({said}): the curves are not drawn")
        sys.exit(1)
    print(f"both runs' curves drawn ({said}, {width}x{height})")


if __name__ == "__main__":
    main()
