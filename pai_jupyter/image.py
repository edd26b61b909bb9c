"""The name docs/python.md gave the image catalogue before it moved to ``pai_jupyter.sdk.images`` (beside the
Estimator that runs the images); kept so that notebooks written against it keep working."""

from .sdk.images import BUILT_IN, ImageInfo, list_images, retrieve

__all__ = ["BUILT_IN", "ImageInfo", "list_images", "retrieve"]
