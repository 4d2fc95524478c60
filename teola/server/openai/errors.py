"""Errors on the OpenAI-compatible door's paths in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``, with OpenAI's status codes, so the official SDK
raises the error class it raises against OpenAI (400 `BadRequestError`, 401 `AuthenticationError`,
404 `NotFoundError`, 429 `RateLimitError`, 5xx `InternalServerError`) and its `e.code`, `e.type`
and `e.param` are set. Every other path keeps teola's ``{"error": code, "detail": message}``
(teola.server.errors, whose handlers call `door_response` for the door's paths). The field a
request error is about travels as `ApiError.param`."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

DOOR_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/embeddings", "/v1/responses")
# teola's own 422 (invalid fields) is OpenAI's 400; the rest keep their status
STATUS = {422: 400}
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAIError(BaseModel):
    """OpenAI's error object: `type` is the kind of failure, `code` teola's code for it, `param` the
    request field it is about (or null)."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorResponse(BaseModel):
    """Every error on the OpenAI-compatible door's paths."""

    error: OpenAIError


def is_door_path(path: str) -> bool:
    """Whether `path` is one of the OpenAI-compatible door's (answered in OpenAI's error shape)."""
    return any(path == p or path.startswith(p + "/") for p in DOOR_PATHS)


def error_object(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body for a failure with teola's `status` and `code`."""
    status = STATUS.get(status, status)
    kind = TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def door_response(
    status: int, code: str, message: str, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The JSON answer of a failure on the door's paths (status 422 answered as 400)."""
    return JSONResponse(
        error_object(status, code, message, param), status_code=STATUS.get(status, status), headers=headers
    )


def door_error_event(status: int, code: str, message: str, param: str | None = None) -> str:
    """A failure after a stream started, as the server-sent event OpenAI's SDK raises from."""
    return f"data: {json.dumps(error_object(status, code, message, param))}\n\n"
