"""Images for an input: where the channels go (the input's layout), resized when asked, checked against H and W."""

from __future__ import annotations

import numpy as np

from ..base.deps import require
from ..base.errors import DataError, UsageError
from ..base.limits import require_memory
from ..base.naming import option_name
from ..model.runtime import TensorInfo
from .readers import decode_image


def image_layout(info: TensorInfo) -> tuple[str, int, int | str | None, int | str | None]:
    """Where an image goes in an input: (layout, channels, H, W).

    The layout is ``NCHW``, ``NHWC``, ``CHW`` or ``HWC``, chosen by where a fixed
    dim of 1 or 3 sits.
    """
    shape = info.shape
    if shape is not None and len(shape) == 4:
        if shape[1] in (1, 3):
            return "NCHW", int(shape[1]), shape[2], shape[3]
        if shape[3] in (1, 3):
            return "NHWC", int(shape[3]), shape[1], shape[2]
    if shape is not None and len(shape) == 3:
        if shape[0] in (1, 3):
            return "CHW", int(shape[0]), shape[1], shape[2]
        if shape[2] in (1, 3):
            return "HWC", int(shape[2]), shape[0], shape[1]
    raise DataError(
        f"cannot lay out an image for input {info.name!r} (shape {info.shape_text()}): it needs a fixed channel dim "
        "of 1 or 3 at axis 1 (NCHW) or axis 3 (NHWC)",
        hint="give the data as .npy instead",
    )


def load_image(path: str, info: TensorInfo, resize: bool) -> np.ndarray:
    """Read an image as BGR (or gray) uint8 laid out for the input."""
    layout, channels, height, width = image_layout(info)
    image = decode_image(path, channels)
    if image is None:
        raise DataError(
            f"{path}: neither an image (any format OpenCV or Pillow reads) nor an array file (.npy, .npz, .pb)"
        )
    if resize:
        image = _resized(image, path, info, channels, height, width)
    got_h, got_w = image.shape[:2]
    for want, got in ((height, got_h), (width, got_w)):
        if isinstance(want, int) and want != got:
            raise DataError(
                f"{path}: image is {got_w}x{got_h} (WxH), but input {info.name!r} takes "
                f"{width}x{height} ({info.shape_text()})",
                hint=f"pass {option_name('resize_input')}",
            )
    if image.ndim == 2:
        image = image[:, :, None]
    if layout in ("NCHW", "CHW"):
        image = image.transpose(2, 0, 1)
    if layout in ("NCHW", "NHWC"):
        image = image[None]
    return np.ascontiguousarray(image)


def _resized(
    image: np.ndarray, path: str, info: TensorInfo, channels: int, height: int | str | None, width: int | str | None
) -> np.ndarray:
    """The image resized to the H and W the input fixes (``--resize-input``)."""
    if not (isinstance(height, int) and isinstance(width, int)):
        raise DataError(
            f"{option_name('resize_input')} needs input {info.name!r} to fix H and W, but its shape is {info.shape_text()}"
        )
    # the resized image, its copy laid out for the input, and that cast to a 4-byte input dtype
    require_memory(
        6 * width * height * channels, f"{option_name('resize_input')} to {width}x{height} for {path}", UsageError
    )
    cv2 = require("cv2", purpose="reading images")

    try:
        resized: np.ndarray = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
        return resized
    except cv2.error as exc:
        message = " ".join(str(exc).split())
        raise DataError(f"{path}: OpenCV cannot resize the image to {width}x{height} ({message[-160:]})") from None
