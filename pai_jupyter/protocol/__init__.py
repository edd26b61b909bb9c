"""The job protocol: one typed model for OpenPAI v1 JSON and v2 YAML, validation with field paths, conversion,
``<% %>`` rendering and secret masking."""

from .errors import ConversionError, JobValidationError, Problem
from .load import job_from_document, job_from_text
from .model import Deployment, Job, Port, Prerequisite, RoleCommands, TaskRole
from .parse import load_document
from .render import MASK, mask_document, masked_text, render, render_commands, role_scopes
from .wire import detect_version

__all__ = [
    "MASK",
    "ConversionError",
    "Deployment",
    "Job",
    "JobValidationError",
    "Port",
    "Prerequisite",
    "Problem",
    "RoleCommands",
    "TaskRole",
    "detect_version",
    "job_from_document",
    "job_from_text",
    "load_document",
    "mask_document",
    "masked_text",
    "render",
    "render_commands",
    "role_scopes",
]
