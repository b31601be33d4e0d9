"""Draws docs/img/frame_path.png: one NV21 frame's path into an input image
(run by docs/img/make.sh; needs clayout[plot])."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import runtime  # noqa: E402

MEAN, STD = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)


def scene(w=640, h=480) -> np.ndarray:
    """An RGB scene: sky, sun, hills, noise."""
    y, x = np.mgrid[0:h, 0:w] / np.array([h, w])[:, None, None]
    rgb = np.stack([90 + 80 * y, 140 + 60 * y, 230 - 40 * y], -1)
    sun = np.exp(-(((x - 0.72) / 0.08) ** 2 + ((y - 0.25) / 0.1) ** 2))[..., None]
    rgb = rgb * (1 - sun) + np.array([255, 220, 120]) * sun
    hill = y > 0.62 + 0.08 * np.sin(9 * x)
    rgb[hill] = np.stack([60 + 40 * x, 120 + 50 * y, 50 + 0 * x], -1)[hill]
    rgb += np.random.default_rng(0).normal(0, 4, rgb.shape)
    return np.clip(rgb, 0, 255)


def nv21(rgb: np.ndarray) -> np.ndarray:
    """BT.601 limited range, chroma averaged over 2x2 blocks, V before U."""
    r, g, b = np.moveaxis(rgb, -1, 0)
    yy = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    h, w = yy.shape
    half = [c.reshape(h // 2, 2, w // 2, 2).mean((1, 3)) for c in (v, u)]
    vu = np.stack(half, -1).reshape(h // 2, w)
    return np.clip(np.rint(np.concatenate([yy, vu])), 0, 255).astype(np.uint8)


def main() -> None:
    frame = nv21(scene())
    crop = (80, 40, 480, 400)
    rgb = runtime.from_frame(frame, "nhwc", format="nv21", crop=crop, engine="cpu")[0]
    box = runtime.from_frame(frame, "nhwc", format="nv21", crop=crop, size=(320, 320),
                             fit="letterbox", fill=114, engine="cpu")[0]
    img = runtime.from_frame(frame, "in_out_channel", format="nv21", crop=crop,
                             size=(320, 320), fit="letterbox", fill=114, mean=MEAN, std=STD,
                             dtype="f16", engine="cpu")
    shown = img[..., :3].astype(np.float32) * np.array(STD) + np.array(MEAN)
    fig, ax = plt.subplots(1, 4, figsize=(16, 4.6))
    ax[0].imshow(frame, cmap="gray", vmin=0, vmax=255)
    ax[0].add_patch(plt.Rectangle(crop[:2], crop[2], crop[3], fill=False, ec="red", lw=2))
    ax[0].axhline(479.5, color="yellow", lw=1)
    ax[0].set_title("camera frame: NV21, u8 (720, 640)\nY plane, then V,U at half size; crop")
    ax[1].imshow(rgb / 255)
    ax[1].set_title("colour: BT.601 -> R, G, B\n(float, clamped, not rounded)")
    ax[2].imshow(box / 255)
    ax[2].set_title("sample: letterbox to 320x320\nbilinear, fill 114")
    ax[3].imshow(np.clip(shown / 255, 0, 1))
    ax[3].set_title("in_out_channel f16 image (320, 320, 4)\n(x - mean)/std in lanes 0-2, lane 3 = 0")
    for a in ax:
        a.set_xticks([])
        a.set_yticks([])
    fig.suptitle("runtime.from_frame: one conversion, one kernel on OpenCL", fontsize=13)
    fig.tight_layout()
    fig.savefig("frame_path.png", dpi=70)


if __name__ == "__main__":
    main()
