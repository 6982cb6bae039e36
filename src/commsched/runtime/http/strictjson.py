"""JSON over HTTP for the runtime's services (the daemon, the agent): strict bodies, one error shape.

Every error a service answers has one shape, ``{"error": ONE LINE, "field": WHERE}`` (a 422 also lists
pydantic's findings under ``detail``): a malformed body (422: not JSON, a key given twice, a wrong
type, an unknown field), a bad query parameter (422), and a route or method that does not exist (404,
405). A body with a key given twice is refused (the standard parser would keep the last one silently).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["BodyError", "StrictJSONRoute", "add_shape_handlers", "check_body"]

_BODY_METHODS = {"POST", "PUT", "PATCH"}


class BodyError(Exception):
    """A request body that is not a JSON document with distinct keys (answered 422)."""

    def __init__(self, error: str, field: str) -> None:
        super().__init__(error)
        self.error = error
        self.field = field


def _distinct(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a key given twice in one JSON object."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BodyError(f"body: key {key!r} is given twice in one object", f"body.{key}")
        out[key] = value
    return out


def check_body(raw: bytes) -> None:
    """Refuse a body that is not JSON, or that gives a key twice (:class:`BodyError`).

    Examples
    --------
    >>> check_body(b'{"name": "h0", "nics": []}')
    >>> check_body(b'{"name": "h0", "name": "h1"}')
    Traceback (most recent call last):
    ...
    commsched.runtime.http.strictjson.BodyError: body: key 'name' is given twice in one object
    """
    try:
        json.loads(raw, object_pairs_hook=_distinct)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise BodyError(f"body: not JSON: {exc.msg} ({where})", "body") from None
    except UnicodeDecodeError:
        raise BodyError("body: not UTF-8 text", "body") from None


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is checked by :func:`check_body` before FastAPI parses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            if request.method in _BODY_METHODS:
                raw = await request.body()
                if raw.strip():
                    check_body(raw)
            return await handler(request)

        return strict


def _field(loc: Any) -> str:
    return ".".join(str(p) for p in loc)


def add_shape_handlers(app: FastAPI) -> None:
    """Answer ``app``'s malformed bodies, bad parameters and unknown routes as ``{"error", "field"}``."""

    @app.exception_handler(BodyError)
    async def _body(_r: Request, e: BodyError) -> JSONResponse:
        return JSONResponse({"error": e.error, "field": e.field}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        errs = list(e.errors())
        lines = [_field(err.get("loc", ())) + ": " + str(err.get("msg", "")) for err in errs]
        field = _field(errs[0].get("loc", ())) if errs else ""
        detail = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in errs]
        return JSONResponse({"error": "; ".join(lines), "field": field, "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(r: Request, e: StarletteHTTPException) -> JSONResponse:
        field = "method" if e.status_code == 405 else "path"
        body = {"error": f"{r.method} {r.url.path}: {e.detail}", "field": field}
        return JSONResponse(body, status_code=e.status_code, headers=e.headers)
