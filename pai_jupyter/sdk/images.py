"""A catalogue of training images: a documented built-in list, the images present in the local dockerd, and
``$PAI_JUPYTER_HOME/images.yaml`` (``- {framework, version, accelerator, uri}`` entries)."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ..common.home import pai_home


@dataclass(frozen=True)
class ImageInfo:
    framework: str
    version: str
    accelerator: str  # "cpu" | "gpu"
    uri: str
    present: bool = False  # in the local Docker engine now


BUILT_IN = [
    ImageInfo("python", "3.11", "cpu", "python:3.11-slim"),
    ImageInfo("python", "3.12", "cpu", "python:3.12-slim"),
    ImageInfo("pytorch", "2.5", "gpu", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"),
    ImageInfo("pytorch", "2.5", "cpu", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"),
    ImageInfo("tensorflow", "2.17", "cpu", "tensorflow/tensorflow:2.17.0"),
    ImageInfo("tensorflow", "2.17", "gpu", "tensorflow/tensorflow:2.17.0-gpu"),
    ImageInfo("tensorflow", "1.15", "gpu", "openpai/standard:python_3.6-tensorflow_1.15-gpu"),
]


def _local_tags() -> set[str]:
    try:
        import docker

        client = docker.from_env(timeout=3)
        return {tag for image in client.images.list() for tag in image.tags}
    except Exception:  # no engine here: nothing is present
        return set()


def _configured() -> list[ImageInfo]:
    path = pai_home() / "images.yaml"
    if not path.exists():
        return []
    entries = yaml.safe_load(path.read_text()) or []
    return [
        ImageInfo(str(e["framework"]), str(e.get("version", "")), str(e.get("accelerator", "cpu")), str(e["uri"]))
        for e in entries
        if isinstance(e, dict) and "framework" in e and "uri" in e
    ]


def list_images(framework: str | None = None) -> list[ImageInfo]:
    """Known images (configured first, then built-in, then other local tags as framework 'local')."""
    tags = _local_tags()
    known = _configured() + BUILT_IN
    out = [ImageInfo(i.framework, i.version, i.accelerator, i.uri, i.uri in tags) for i in known]
    listed = {i.uri for i in out}
    out += [ImageInfo("local", tag.rsplit(":", 1)[-1], "cpu", tag, True) for tag in sorted(tags - listed)]
    return [i for i in out if framework is None or i.framework == framework]


def retrieve(framework: str, version: str | None = None, accelerator: str = "cpu") -> str:
    """The uri of an image for a framework (newest version when none is given); present ones are preferred."""
    candidates = [
        i for i in list_images(framework) if i.accelerator == accelerator and (version is None or i.version == version)
    ]
    if not candidates:
        versions = sorted({i.version for i in list_images(framework)})
        raise LookupError(
            f"no {accelerator} image for {framework} {version or ''}".strip()
            + (f"; versions known: {', '.join(versions)}" if versions else "; see list_images()")
        )

    def key(i: ImageInfo) -> tuple[bool, tuple[int, ...]]:
        nums = tuple(int(x) for x in i.version.split(".") if x.isdigit())
        return (i.present, nums)

    return max(candidates, key=key).uri
