"""Draws docs/img/frame_path.png: one NV21 frame's path into an input image
(run by docs/img/make.sh; needs clayout[plot])."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import runtime  # noqa: E402
from runtime.cli.demo import sample_frame  # noqa: E402   (the demo's photo-like NV21 frame)

MEAN, STD = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)


def main() -> None:
    frame = sample_frame()   # 640x480 NV21
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
    fig.tight_layout(rect=(0, 0, 1, 0.92))   # room for the suptitle
    fig.savefig("frame_path.png", dpi=70)


if __name__ == "__main__":
    main()
